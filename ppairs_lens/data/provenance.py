"""Where each file of the replication comes from: repository, pinned commit, path there and
the SHA-256 of the exact bytes (typed from the provenance table of ``../shared/datasets``'s
README), and the raw-file URL of each.

The files are laid out as in ``../shared/datasets`` (``SourceFile.file``), so a fetched folder
can stand in for it wherever a data folder is taken. Files that folder holds but this table
does not (:data:`NOT_FETCHED`) have no pinned public source and hash, and none of them is read
by the replication.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["MIRROR_ENV", "NOT_FETCHED", "PROVENANCE", "RAW_BASE", "SourceFile", "data_base",
           "source_url"]

#: Where raw files are served: ``<base>/<owner>/<repo>/<commit>/<path>``.
RAW_BASE = "https://raw.githubusercontent.com"
#: An environment variable that replaces :data:`RAW_BASE` (a mirror, or a local server).
MIRROR_ENV = "PPAIRS_LENS_DATA_MIRROR"


@dataclass(frozen=True)
class SourceFile:
    """One file of the replication: ``file`` is its place in the data folder, ``repo``
    (``owner/name``), ``commit`` and ``path`` where it is public, ``sha256`` its bytes."""

    file: str
    repo: str
    commit: str
    path: str
    sha256: str


def data_base() -> str:
    """The base URL of raw files: ``$PPAIRS_LENS_DATA_MIRROR`` when set, else GitHub's."""
    return (os.environ.get(MIRROR_ENV) or RAW_BASE).rstrip("/")


def source_url(src: SourceFile, base: str | None = None) -> str:
    """``<base>/<owner>/<repo>/<commit>/<path>``, the path URL-encoded (spaces and all)."""
    base = (base if base is not None else data_base()).rstrip("/")
    return f"{base}/{src.repo}/{src.commit}/{quote(src.path, safe='/')}"


_PPAIRS = ("maiush/PPairS", "cc4ba407ba0ece35214d286345371a60ee028230")
_LLMBAR = ("princeton-nlp/LLMBar", "900616bff90b6c6c8e1681f7d079250637c55992")
_MCTACO = ("CogComp/MCTACO", "0ba9b790ad5a87ab3eef0f0cb7819408192f9729")
_CLOZE = ("p-null/openai-gpt-pytorch", "3684b880f64ece7772087afe25ba73835bce50ce")
_GOT = ("saprmarks/geometry-of-truth", "5d1c630c44f7e50bda7ad86d601ccadf9abc5ddb")
_CLIMATEX = ("rlacombe/ClimateX", "f3449a5b4085a41a8439e72e270da5fe23a9a3d6")

#: Every file the replication reads, with its source and hash.
PROVENANCE: tuple[SourceFile, ...] = tuple(SourceFile(f, *src, path, sha) for f, src, path, sha in [
    ("summeval/summeval.jsonl", _PPAIRS, "data/summeval.jsonl",
     "7b152ee2f44aca4259e4bbde69900bd0aebc97550d95d54681430595f0fb94d3"),
    ("hanna/hanna.jsonl", _PPAIRS, "data/hanna.jsonl",
     "1716e20df8318e4d578ae44f3b3f88698cddf98eaccce13d79a59e7eb88af1f2"),
    ("newsroom/newsroom.jsonl", _PPAIRS, "data/newsroom.jsonl",
     "659ea40f7b297e4bbbec0334142921a3178cba4b602c69faee59f5f3ffa3a52a"),
    ("llmbar/LLMBar_Natural/dataset.json", _LLMBAR, "Dataset/LLMBar/Natural/dataset.json",
     "f7127b7aa78104cb8e03a2b1b3ac0077e95b125714dd441a8ee63666145a3375"),
    ("llmbar/CaseStudy_Normal/dataset.json", _LLMBAR, "Dataset/CaseStudy/Normal/dataset.json",
     "f6f2c4833d57ab8aaa8aa51bf521296b6f2e26323aad5c08da5331924af450ba"),
    ("llmbar/Processed_MT-Bench/dataset.json", _LLMBAR,
     "Dataset/Processed/MT-Bench/dataset.json",
     "c152249bc095d152485954bd2abd9ea79528ee5e4c045bfe9ef78755b03c20d8"),
    ("llmbar/Adversarial_Neighbor/dataset.json", _LLMBAR,
     "Dataset/LLMBar/Adversarial/Neighbor/dataset.json",
     "6712c7eda6342602e0bc7c06c282fa95e2110d4e741a284026a62d937f9780a0"),
    ("llmbar/Adversarial_GPTInst/dataset.json", _LLMBAR,
     "Dataset/LLMBar/Adversarial/GPTInst/dataset.json",
     "1002425f73c2cf54b6e6de99bce3f6c60fa2a17d13194772e37d7481c1351d42"),
    ("llmbar/Adversarial_GPTOut/dataset.json", _LLMBAR,
     "Dataset/LLMBar/Adversarial/GPTOut/dataset.json",
     "1ff56e520d7607750a9866a3be0f5b850392ca4477a1f69d80f32bd3e310f561"),
    ("llmbar/Adversarial_Manual/dataset.json", _LLMBAR,
     "Dataset/LLMBar/Adversarial/Manual/dataset.json",
     "0d9598769a39cdbbd265778c37e49939d41d5f76dcfb17bd75dcfa07516d3837"),
    ("mctaco/dev_3783.tsv", _MCTACO, "dataset/dev_3783.tsv",
     "8de54f6d3e0a6466e4ba2c5179c7f9ac3442eeba8683c46fd712f5f54751d6dd"),
    ("story_cloze/cloze_test_val_spring2016.csv", _CLOZE,
     "data/cloze_test_val__spring2016 - cloze_test_ALL_val.csv",
     "b1490dd866bb30c136004d6ebda5ffcf39aafa4535a36e61b24673ff96235854"),
    ("geometry_of_truth/cities.csv", _GOT, "datasets/cities.csv",
     "f2560a0c1758c69935b50125111b574b71896bb75930dd87b1d8c973c1fa086e"),
    ("geometry_of_truth/larger_than.csv", _GOT, "datasets/larger_than.csv",
     "406d6872e97910f3af5a031600d4932b5a567b8666e7545c8b446057471ad723"),
    ("geometry_of_truth/sp_en_trans.csv", _GOT, "datasets/sp_en_trans.csv",
     "9afa97c1b8af539a05f47655a80a5c7832c6fdb914885fd24cb4bcccbe2795b5"),
    ("climatex/ipcc_statements_dataset.tsv", _CLIMATEX, "data/ipcc_statements_dataset.tsv",
     "6d21f9d7a29814d557e6073a048378e9e6942234b09267094ffbe4e12a2c3a25"),
    ("climatex/published_predictions/gpt-4_few-shot.csv", _CLIMATEX,
     "results/iccs-fewshots/gpt4-fewshots-temp0-2023-06-09.csv",
     "f0b7f53fccf55fb57cb765f208a6e6d9b8708a0f070cc74833e2dfd63c41f13c"),
    ("climatex/published_predictions/gpt-4_zero-shot.csv", _CLIMATEX,
     "results/iccs-zeroshot/gpt4-zeroshot-temp0-2023-06-09.csv",
     "8e2c5ea44490a39a305fb79ec90805c8cfc7dbe4957978c6864e74eeced21669"),
])

_NO_SOURCE = "no pinned public source and hash in the provenance table"
#: Files ``../shared/datasets`` holds that a fetch leaves out, each with the reason (printed).
NOT_FETCHED: dict[str, str] = {
    "README.md": "the data folder's description (its provenance table is this module)",
    "mctaco/readme.txt": f"{_NO_SOURCE} (MC-TACO's description, not data)",
    **{f"climatex/published_predictions/{m}_{s}.csv":
       f"{_NO_SOURCE} (the ClimateX paper's {m} predictions, which the replication does "
       "not read)"
       for m in ("gpt-3.5-turbo", "cohere-command-xl") for s in ("zero-shot", "few-shot")},
}
