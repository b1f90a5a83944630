"""Instructions of C2LLM in the format the published weights expect: the project's one prompt table.

The texts are those of mteb's C2LLM entry (`mteb/models/model_implementations/codefuse_models.py`), which
produced the leaderboard numbers; a test checks that they equal the installed mteb's. They are the paper's
Table 1 verbatim (typos included) except for CodeTransOceanDL, where mteb uses CodeTransOceanContest's
instruction (`PAPER_TABLE_1_DIFFERENCES` keeps the paper's text).

Queries get the task instruction followed by a newline; documents get "Retrieved Answer:" with no
separator, for every task. They are stored as sentence-transformers prompts named "{task}-query" /
"{task}-document", the names mteb looks up first, plus generic "query" / "document" prompts for everything
else.
"""

DOCUMENT_PROMPT = "Retrieved Answer:"

# MTEB-Code task name -> query instruction, as mteb's C2LLM entry sends it.
TASK_INSTRUCTIONS = {
    "AppsRetrieval": (
        "Given a problem description from a programming contest, retrieve code examples that can "
        "assist in solving it."
    ),
    "CodeSearchNetRetrieval": "Retrieve the code that solves the following query:",
    "CodeSearchNetCCRetrieval": (
        "Given an initial code segment, retrieve the subsequent segment that continues the "
        "code."
    ),
    "COIRCodeSearchNetRetrieval": (
        "Given a code snippet, retrieve its corresponding document string that summarizes "
        "its functionality."
    ),
    "CodeEditSearchRetrieval": "Retrieve the diff code that relevant the following query:",
    "CodeFeedbackMT": (
        "Given a multi-turn conversation history that includes both text and code, retrieve relevant "
        "multi-modal answers composed of text and code that address the ongoing discussion."
    ),
    "CodeFeedbackST": (
        "Given a single-turn question composed of text and code, retrieve suitable answers that also "
        "mix text and code to provide helpful feedback."
    ),
    "CodeTransOceanContest": (
        "Given a Python code snippet, retrieve its semantically equivalent version written in "
        "C++."
    ),
    "CodeTransOceanDL": "Given a Python code snippet, retrieve its semantically equivalent version written in C++.",
    "CosQA": "Given a query from a web search, retrieve code that is helpful in addressing the query.",
    "StackOverflowQA": (
        "Given a question combining text and code, retrieve relevant answers that also contain both "
        "text and code snippets and can address the question."
    ),
    "SyntheticText2SQL": "Given a natural language question, retrieve SQL queries that serve as appropriate responses.",
}
# Where Table 1 of the paper (arXiv 2512.21332) reads differently from mteb's entry: task -> paper's text.
PAPER_TABLE_1_DIFFERENCES = {
    "CodeTransOceanDL": "Given a code snippet, retrieve a semantically equivalent implementation of the same code.",
}
# The paper's column order of MTEB-Code (Table 2).
MTEB_CODE_TASKS = tuple(TASK_INSTRUCTIONS)
# Natural-language question -> code is the commonest use, so the generic query prompt is that task's.
GENERIC_QUERY_TASK = "CodeSearchNetRetrieval"


def query_prompt(instruction: str) -> str:
    """The text put before a query: the instruction, then a newline."""
    return f"{instruction}\n"


def sentence_transformers_prompts() -> dict[str, str]:
    """All prompts by name, as `config_sentence_transformers.json` stores them."""
    prompts = {
        "query": query_prompt(TASK_INSTRUCTIONS[GENERIC_QUERY_TASK]),
        "document": DOCUMENT_PROMPT,
    }
    for task, instruction in TASK_INSTRUCTIONS.items():
        prompts[f"{task}-query"] = query_prompt(instruction)
        prompts[f"{task}-document"] = DOCUMENT_PROMPT
    return prompts
