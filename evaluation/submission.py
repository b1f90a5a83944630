"""What a leaderboard submission must satisfy before anything runs, and mteb's mock-run report.

The results repository (github.com/embeddings-benchmark/results) files results under
`results/ORG__NAME/REVISION/` and its CI rejects what cannot be traced to weights on the Hub: a name
without an organisation, and a revision that is not a Hub commit. Its CI also needs the model in mteb's
registry (the mteb pull request comes first), and a name mteb already has is taken at any revision: the
results repository keeps one set of results per model name and task, so its CI fails
`test_no_duplicate_task_results_exist` for a second revision. New weights need a new name.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from c2llm_plumbing.atomic import write_atomically

if TYPE_CHECKING:
    from mteb.models import ModelMeta

HUB_COMMIT = re.compile(r"[0-9a-f]{40}")
# The stand-in name of a model folder evaluated without --model-name: never a submittable name.
LOCAL_NAME_PREFIX = "local/"
HUB_MODEL_ID = re.compile(r"[\w.-]+/[\w.-]+")


class SubmissionError(ValueError):
    """A submission the results repository would reject; the message says why and what to pass instead."""


def check_submission_identity(name: str | None, revision: str | None, name_flag: str = "--model-name",
                              command: str = "--submit") -> None:
    """Refuse a name or revision the results repository's CI rejects (see the module docstring)."""
    if not name or not HUB_MODEL_ID.fullmatch(name) or name.startswith(LOCAL_NAME_PREFIX):
        raise SubmissionError(
            f"{command} needs {name_flag} ORG/NAME, the Hub id of the released weights (got {name!r}): the results "
            "repository files results under that name and its CI checks that mteb's registry knows it."
        )
    if not revision or not HUB_COMMIT.fullmatch(revision):
        raise SubmissionError(
            f"{command} needs --revision HUB_COMMIT, the 40-hex-digit Hub commit of the released weights (got "
            f"{revision!r}): the results repository's CI rejects results whose revision is not a commit, since "
            "nobody could load the weights they were computed with."
        )


def check_not_yet_in_mteb(name: str, revision: str) -> None:
    """Refuse a name mteb's registry already has, at any revision (see the module docstring)."""
    import mteb

    known = {meta.name: meta.revision for meta in mteb.get_model_metas()}
    if name in known:
        same = "these weights are already evaluated" if known[name] == revision else (
            f"the results repository keeps one set of results per name and task, so a second revision fails its CI "
            f"(test_no_duplicate_task_results_exist)")
        raise SubmissionError(
            f"mteb already has {name} (revision {known[name]}): {same}. Submit your own weights under a new name, "
            "e.g. ORG/NAME-repro."
        )


def check_no_earlier_submission_branch(results_clone: Path, name: str, revision: str) -> None:
    """Refuse to submit again what an earlier submission left on a branch of the local results clone: mteb's
    `submit_results` compares with the repository's main branch only, so it would make a second branch of the
    same results without a word."""
    if not (results_clone / ".git").exists():
        return
    results = f"results/{name.replace('/', '__')}/{revision}"
    git = lambda *args: subprocess.run(["git", "-C", str(results_clone), *args], capture_output=True, text=True,
                                       timeout=60, check=True).stdout
    try:
        submitted = git("for-each-ref", "--format=%(refname:short)", "refs/heads/mteb-results-*").split()
        branches = [branch for branch in submitted if git("ls-tree", "-d", "--name-only", branch, results).strip()]
    except (OSError, subprocess.SubprocessError):  # no git, or a clone git cannot read: mteb will say so itself
        return
    if branches:
        raise SubmissionError(
            f"an earlier --submit left {results} on branch {', '.join(branches)} of {results_clone}: push that branch "
            f"and open its pull request as it printed, or delete it (git -C {results_clone} branch -D "
            f"{branches[0]}) to submit again."
        )


def check_training_datasets_known(meta: ModelMeta) -> None:
    """Refuse to submit a model whose training data is unknown: the leaderboard would call it zero-shot."""
    if meta.training_datasets is None:
        raise SubmissionError(
            f"{meta.name}: its training data is unknown, so the leaderboard would show it as zero-shot on every "
            "task. List its training data under `datasets:` in the model card's front matter (the trainer's export "
            "writes them) or pass --training-datasets (Hub dataset ids or mteb task names)."
        )


def write_mock_run_report(encoder, path: Path) -> bool:
    """Run mteb's mock-run check on `encoder` and write its Markdown report; True if every check passed.

    Same check and report as `mteb mock-run -m NAME`, which can only load models already in mteb's
    registry; this runs it on a local folder before the mteb pull request.
    """
    import mteb

    results = mteb.mock_run(encoder)
    write_atomically(Path(path), results.to_markdown() + "\n")
    return results.all_passed
