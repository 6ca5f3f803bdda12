"""Where each file of the replication comes from: repository, pinned commit, path there and
the SHA-256 of the exact bytes (typed from the provenance table of ``../shared/datasets``'s
README), laid out as in that folder (``SourceFile.file``), so a fetched folder can stand in
for it wherever a data folder is taken. Files that folder holds but this table does not
(:data:`NOT_FETCHED`) have no pinned public source and hash, and the replication reads none
of them.
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
_CREST = ("phosseini/CREST", "976043dc229bc0dc595bfaf81d07a4f2f7f9344e")

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
    ("climatex/published_predictions/gpt-3.5-turbo_few-shot.csv", _CLIMATEX,
     "results/iccs-fewshots/gpt3.5-turbo-fewshots-temp0-2023-06-09.csv",
     "ba99d4254da9beb82135aa58b3fcccb686c63d328392edefc970248e2d22ecf3"),
    ("climatex/published_predictions/gpt-3.5-turbo_zero-shot.csv", _CLIMATEX,
     "results/iccs-zeroshot/gpt3.5-turbo-zeroshot-temp0-2023-06-10.csv",
     "a90e108455e2ee1ac2e291790fb942061d75db125d9ec09c512ca8cbbd2f7835"),
    ("climatex/published_predictions/cohere-command-xl_few-shot.csv", _CLIMATEX,
     "results/iccs-fewshots/cohere-command-xlarge-fewshots-temp0-2023-06-09.csv",
     "6c8007e3130927ba0fb96c93298c3ef07a5736ebeea8361e15821db1bb74956c"),
    ("climatex/published_predictions/cohere-command-xl_zero-shot.csv", _CLIMATEX,
     "results/iccs-zeroshot/cohere-command-xl-zeroshot-temp0-2023-06-09.csv",
     "aa60f618b530817ab4e704dd73123d3ed6339d99335d163237142221b8845391"),
]) + tuple(SourceFile(f"caters/{f}", *_CREST, f"data/caters/{f}", sha) for f, sha in [
    # CaTeRS (the paper's sixth dataset): the CREST repository keeps it under data/caters/
    ("caters_evaluation/dev/part_11.ann", "4c0dbe619d6e7e54b33261c3b2cda7f1feddab4d41c4f0a23a359214376eb0ed"),
    ("caters_evaluation/dev/part_11.txt", "dc24afe62f4ba8dc1f20e7feeaa60b989413a43023d32769cc698cd926a36331"),
    ("caters_evaluation/dev/part_12.ann", "cd21bc965ad300a34579bd90caa3c02c1cc71d2b785098c59beb980752c29a1d"),
    ("caters_evaluation/dev/part_12.txt", "e42b68a06ee6fb7d434fdb941d340303ed8ea7035469fff71b66f616df2d3cc0"),
    ("caters_evaluation/dev/part_13.ann", "f7c36a9a56e105ee4b94645aa5a71050d3594dd7762ded7e29cd4f97dd185dda"),
    ("caters_evaluation/dev/part_13.txt", "a1143b4325466351663ec8bfb1cd9556d058f890e62b7f8297b6bae1445126b3"),
    ("caters_evaluation/train/batch_1.ann", "12c427ef86aab77e656f19f1691a67f7c26a959bbae0d57d277f4742d6d381d7"),
    ("caters_evaluation/train/batch_1.txt", "b97210dbfa61b3639a3376c591afcf395fd9c536f7940123483728a283b5bbc4"),
    ("caters_evaluation/train/batch_10.ann", "f5aa52cdd0df06235cc886e25dc3c439b9946b1d3f25ead665239ee2a747e0f7"),
    ("caters_evaluation/train/batch_10.txt", "d26e43c5ede11d9782e92996a570c671798473b4fbf41805c5fb0a522e02f501"),
    ("caters_evaluation/train/batch_2.ann", "4fb8b410973e2358c0258084a89fd268c29a66fa958521cabf2bf71fe6f9a31a"),
    ("caters_evaluation/train/batch_2.txt", "32e2d78884d3d88c6e4212e9ab89379e970ab3f5533e0fe0d0bf11814f9387b0"),
    ("caters_evaluation/train/batch_3.ann", "7193dbafab993f12481d75645da49238e4545cf3a7ae8f517e725e05b8aeec13"),
    ("caters_evaluation/train/batch_3.txt", "1a95327365c79f229c7fd5887bbde4fe3bba1be9e34cb5dab5e97c1bed86e713"),
    ("caters_evaluation/train/batch_4.ann", "f5f29d1a198d898fa84d134261fb500933b3ff4421ec57c0aa44125e1348bcd2"),
    ("caters_evaluation/train/batch_4.txt", "f5add5c142de17e06fd5fb08c7a3695143393aff05a344869482fe77722f38af"),
    ("caters_evaluation/train/batch_5.ann", "189fcd021258ee038a9c41ff3a1f40b8a24d50fa2bcd789baf8a443a6cacd6aa"),
    ("caters_evaluation/train/batch_5.txt", "7d4e933b5a77630b5b4d6e0d2a081eaba41fe4c4df0976888aaa484f15eebcc8"),
    ("caters_evaluation/train/batch_6.ann", "51cdae524e15ab6b9077d058ffc5d6db213b5f9f1cd25f0ad8ad87c435dbde45"),
    ("caters_evaluation/train/batch_6.txt", "18b77c93a6abeac3d79e73d38112adcb9523d020879eac28198c607b142ce9c1"),
    ("caters_evaluation/train/batch_7.ann", "acb15cfa80283074b239fab1efee6bfc7ce0d0163434dc1bf4e309dbe4f4343f"),
    ("caters_evaluation/train/batch_7.txt", "da7591b57150be7eb3fd6a09d0bbf8d21722d179ccc09d2029a1cf7d7af90850"),
    ("caters_evaluation/train/batch_8.ann", "07600bfe76246763d52ca6c26a40b2d8f9dbd0dd24a3e264d48951fc403fad7f"),
    ("caters_evaluation/train/batch_8.txt", "1d0ce1c3df20778466a79106ce558776e3c1b895ee3a9ba01ab79492f4df02be"),
    ("caters_evaluation/train/batch_9.ann", "428aadb9370bf7a59136820eaa0c15c1c86ee98ffc6c2d9d24532af2c38e1643"),
    ("caters_evaluation/train/batch_9.txt", "6d9c60754dc41c4c341de5e8d849e555fe6c45f11bec6c72dfe6bc516aa3e685"),
    ("caters_test/test/test_15Oct.ann", "0d01f570620d39793d696f5b66e3b0d273ff37d43daff9e75a4698b6c17f56e9"),
    ("caters_test/test/test_15Oct.txt", "0cd92c723e789da5587b3163a9898eaf66081460d9046e2f2f23080b07c6bfc7"),
    ("caters_test/test_15March_annot1.ann", "0d01f570620d39793d696f5b66e3b0d273ff37d43daff9e75a4698b6c17f56e9"),
    ("caters_test/test_15March_annot2.ann", "43c7e96b44d77cd9e8cde1949965ee1376cf0013364e2409313c5df7b08ea06a"),
])

_NO_SOURCE = "no pinned public source and hash in the provenance table"
#: Files ``../shared/datasets`` holds that a fetch leaves out, each with the reason (printed).
NOT_FETCHED: dict[str, str] = {
    "README.md": "the data folder's description (its provenance table is this module)",
    "mctaco/readme.txt": f"{_NO_SOURCE} (MC-TACO's description, not data)",
}
