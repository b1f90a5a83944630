"""Local BEIR folders as mteb retrieval tasks, with the prompts of their closest MTEB-Code task.

Both command lines run local data through these: `python -m evaluation.suite` (every score of the offline suite)
and `python -m evaluation.mteb_code --local-data`. mteb then computes every retrieval score the project reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from c2llm_data.tasks import DOCUMENT_SIDE, QUERY_SIDE, prompt_name_for

if TYPE_CHECKING:
    from mteb import AbsTask

    from c2llm_data.beir import BeirDataset

LOCAL_TASK_PREFIX = "LocalBEIR-"
LOCAL_SPLIT = "test"


def local_beir_task(dataset: BeirDataset) -> AbsTask:
    """`dataset` as an mteb retrieval task named LocalBEIR-FOLDER, evaluated like any mteb retrieval task."""
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.abstasks.task_metadata import TaskMetadata

    metadata = TaskMetadata(
        name=LOCAL_TASK_PREFIX + dataset.name,
        description=f"Local BEIR folder {dataset.name}.",
        reference=None,
        dataset={"path": f"local/{dataset.name}", "revision": "local"},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=[LOCAL_SPLIT],
        eval_langs=["eng-Latn"],  # informational only; mteb needs one valid code
        main_score="ndcg_at_10",
        date=None, domains=None, task_subtypes=None, license=None, annotations_creators=None,
        dialect=None, sample_creation=None, bibtex_citation=None,
    )

    class LocalBeirTask(AbsTaskRetrieval):
        def load_data(self, num_proc: int | None = None, **kwargs) -> None:
            split = RetrievalSplitData(
                queries=Dataset.from_list([{"id": qid, "text": text} for qid, text in dataset.queries.items()]),
                corpus=Dataset.from_list([{"id": cid, "text": text} for cid, text in dataset.corpus.items()]),
                relevant_docs=dataset.qrels,
                top_ranked=None,
            )
            self.dataset = {"default": {LOCAL_SPLIT: split}}
            self.data_loaded = True

    LocalBeirTask.metadata = metadata
    return LocalBeirTask()


def alias_local_task_prompts(encoder, local_tasks: dict[str, str | None]) -> None:
    """Give each local task (mteb name -> closest MTEB-Code task) the prompts of its MTEB task.

    mteb looks prompts up by task name, and only accepts names of real mteb tasks when the wrapper is
    built, so the local names are added afterwards: to the "{name}-query" / "{name}-document" prompts
    of the sentence-transformers wrapper, or under the task name in the instruct wrapper's `prompts_dict`.
    """
    prompts_dict = dict(getattr(encoder, "prompts_dict", None) or {})
    if prompts_dict:
        for local_name, mteb_task in local_tasks.items():
            if mteb_task in prompts_dict:
                prompts_dict[local_name] = prompts_dict[mteb_task]
        encoder.prompts_dict = prompts_dict
        return
    prompts = dict(getattr(encoder, "model_prompts", None) or {})
    if not prompts:
        return
    for local_name, mteb_task in local_tasks.items():
        for side in (QUERY_SIDE, DOCUMENT_SIDE):
            prompt_name = prompt_name_for(prompts, mteb_task, side)
            if prompt_name:
                prompts[f"{local_name}-{side}"] = prompts[prompt_name]
    encoder.model_prompts = prompts
