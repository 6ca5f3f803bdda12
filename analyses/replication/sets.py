"""The seed experiments' own data, read from a folder laid out like ``../shared/datasets``.

The thesis and the paper judge text against human ratings: SummEval and NEWSROOM (four
aspects each), HANNA, ROCStories (Story Cloze), MC-TACO, MT-Bench, LLMBar (Natural + Normal,
and the four Adversarial subsets of the paper's Figure 4), CaTeRS and ClimateX (read by the
insertion step, not here). :func:`replication_datasets` loads each other dataset present at
the sizes of a :class:`ReplicationSizes` (seeded, leak groups kept whole) and says why any is
skipped. Scored-items sets (SummEval, NEWSROOM, HANNA) are drawn as ``items_per_context``
items of each of ``n_contexts`` contexts with *every* pair among them, so a held-out context
can be sorted (merge sort) from the pairs already scored, with no extra model call.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ppairs_lens.data.caters import load_caters
from ppairs_lens.data.formats import load_dataset
from ppairs_lens.data.newsroom import newsroom_dataset
from ppairs_lens.data.records import Comparison, Dataset
from ppairs_lens.data.specs import subsample_by_context

__all__ = ["ADVERSARIAL_SUBSETS", "NEWSROOM_ASPECTS", "SUMMEVAL_ASPECTS", "ReplicationSizes",
           "combine", "comparison_names", "items_within_contexts", "replication_datasets",
           "replication_files", "shifted_names", "summeval_names"]

#: The thesis's four SummEval aspects (Tables 4.1, 4.2), in its column order.
SUMMEVAL_ASPECTS: tuple[str, ...] = ("coherence", "consistency", "fluency", "relevance")
#: NEWSROOM's four, in the thesis's column order (its "CON" column is informativeness).
NEWSROOM_ASPECTS: tuple[str, ...] = ("coherence", "informativeness", "fluency", "relevance")
#: LLMBar's adversarial subsets (the paper's Figure 4 shifted sets): folder -> dataset name.
ADVERSARIAL_SUBSETS: dict[str, str] = {
    "Adversarial_Neighbor": "llmbar-adv-neighbor", "Adversarial_GPTInst": "llmbar-adv-gptinst",
    "Adversarial_GPTOut": "llmbar-adv-gptout", "Adversarial_Manual": "llmbar-adv-manual"}


@dataclass(frozen=True)
class ReplicationSizes:
    """How much of each dataset a run reads (printed in every caption); the defaults are the
    demo's (``analyses.replication.config.PRESETS``: ``quick`` and ``full``)."""

    # 24 articles: a held-out half of 12 on each aspect. The thesis's comparisons at effects
    # of 0.2-0.4 need 15-30 groups; the demo's 20 minutes hold 24 beside the 300 ClimateX
    # statements. 3 of each article's 16 summaries, drawn at random (the same for every
    # aspect): a draw avoiding tied scores would test on wider, easier gaps than SummEval's
    # (the article is most of the cost; Table 4.2 needs 7+ sorted, --full's 10)
    summeval_contexts: int = 24
    summeval_items: int = 3
    summeval_aspects: tuple[str, ...] = SUMMEVAL_ASPECTS
    # NEWSROOM's articles are long (~1,000 tokens, some 3,500): a preview of 2 articles (one
    # a side), all 7 summaries (Table 4.2 sorts 7, as the thesis), one aspect; decides nothing
    newsroom_contexts: int = 2
    newsroom_items: int = 7
    newsroom_aspects: tuple[str, ...] = ("coherence",)
    hanna_contexts: int = 8  # stories are long (~740 tokens a pair): 8 keep both labels a side
    hanna_items: int = 3
    hanna_aspect: str = "coherence"
    # short pairs, each story a group: 100 give 50 held-out groups. Its methods are all near
    # chance here (differences of 0.00-0.05 would need 400+ groups): the demo spends its
    # time on SummEval's larger differences
    story_cloze_pairs: int = 100
    # one pair from each of 160 questions: 105 sentences (the leak groups; 143 in the file),
    # 52 a held-out half; a question's pairs taken whole gave 28 sentences for 80 pairs
    mctaco_pairs: int = 160
    mctaco_per_question: int | None = 1  # None: a question's pairs whole
    # CaTeRS: stories of the train split (dev and test stay unread), each a group; 40 give
    # 20 held-out groups, 3 of a story's 10 short pairs each (the story the shared prefix)
    caters_stories: int = 40
    caters_per_story: int | None = 3  # None: all 10 pairs of a story
    # long answers (~540 tokens a pair, no shared prefix): one pair from each of 52 questions
    # (of 75) gives 26 held-out groups, the power table's size (whole questions gave 10)
    mt_bench_pairs: int = 52
    mt_bench_per_question: int | None = 1  # None: a question's pairs whole
    llmbar_pairs: int | None = 60  # Natural + Normal (None: all 159)
    # Figure 4's shifted sets (ADVERSARIAL_SUBSETS' folders), each at this many pairs (None:
    # all, 134 / 92 / 47 / 46); 12 is the fewest at which every subset's halves hold 2+ pairs
    # of each label at seed 0 (10 leaves GPTInst one). The demo previews the two with the
    # shortest pairs (GPTInst's and Manual's are 2-4x longer)
    llmbar_adversarial: tuple[str, ...] = ("Adversarial_Neighbor", "Adversarial_GPTOut")
    llmbar_adversarial_pairs: int | None = 12


def items_within_contexts(dataset: Dataset, n_contexts: int, items_per_context: int,
                          seed: int = 0) -> Dataset:
    """``n_contexts`` contexts (seeded) and, in each, ``items_per_context`` items (seeded per
    context) with every comparison among them; records keep the dataset's order."""
    items: dict[str, list[str]] = {}
    for r in dataset.records:
        ids = items.setdefault(r.context_id, [])
        ids += [i for i in (r.item1_id, r.item2_id) if i not in ids]
    contexts = sorted(items)
    random.Random(seed).shuffle(contexts)
    keep_items = {c: set(random.Random(f"{seed}:{c}").sample(
        items[c], min(items_per_context, len(items[c])))) for c in contexts[:n_contexts]}
    records = [r for r in dataset.records if r.context_id in keep_items
               and {r.item1_id, r.item2_id} <= keep_items[r.context_id]]
    return replace(dataset, records=records,
                   name=f"{dataset.name}-c{len(keep_items)}i{items_per_context}s{seed}")


def combine(name: str, parts: list[Dataset]) -> Dataset:
    """One comparison dataset of several files asking the same question (LLMBar Natural +
    Normal); pair, context and item ids are prefixed by each part's name."""
    def tag(part: Dataset, r: Comparison) -> Comparison:
        p = part.name
        return replace(r, pair_id=f"{p}/{r.pair_id}", context_id=f"{p}/{r.context_id}",
                       item1_id=f"{p}/{r.item1_id}", item2_id=f"{p}/{r.item2_id}",
                       group_id=None if r.group_id is None else f"{p}/{r.group_id}")
    return replace(parts[0], name=name, records=[tag(p, r) for p in parts for r in p.records],
                   source=", ".join(str(p.source) for p in parts))


def _entries(sizes: ReplicationSizes, seed: int
             ) -> list[tuple[str, str, Callable[[Path], Dataset], int | None]]:
    """(name, path under the root, loader, size) for every dataset the replication reads (each
    named by :func:`replication_datasets`); a size of 0 leaves the dataset out (a preview may
    skip the costliest), None reads all."""
    def scored(rel: str, aspect: str, n: int, m: int):
        return lambda root: items_within_contexts(load_dataset(root / rel, aspect=aspect), n, m,
                                                  seed)

    def whole(rel: str, n: int | None, per_context: int | None = None):
        return lambda root: subsample_by_context(load_dataset(root / rel), n, seed,
                                                 per_context=per_context)

    summeval, newsroom, hanna = ("summeval/summeval.jsonl", "newsroom/newsroom.jsonl",
                                 "hanna/hanna.jsonl")
    cloze, mctaco = "story_cloze/cloze_test_val_spring2016.csv", "mctaco/dev_3783.tsv"
    mt_bench = "llmbar/Processed_MT-Bench/dataset.json"
    out = [(f"summeval-{a}", summeval,
            scored(summeval, a, sizes.summeval_contexts, sizes.summeval_items),
            sizes.summeval_contexts * sizes.summeval_items) for a in sizes.summeval_aspects]
    for a in sizes.newsroom_aspects:
        load = scored(newsroom, a, sizes.newsroom_contexts, sizes.newsroom_items)
        out.append((f"newsroom-{a}", newsroom,
                    lambda root, load=load, a=a: newsroom_dataset(load(root), a),
                    sizes.newsroom_contexts * sizes.newsroom_items))
    out.append((f"hanna-{sizes.hanna_aspect}", hanna,
                scored(hanna, sizes.hanna_aspect, sizes.hanna_contexts, sizes.hanna_items),
                sizes.hanna_contexts * sizes.hanna_items))
    out.append(("rocstories", cloze, whole(cloze, sizes.story_cloze_pairs),
                sizes.story_cloze_pairs))
    out.append(("mctaco", mctaco, whole(mctaco, sizes.mctaco_pairs, sizes.mctaco_per_question),
                sizes.mctaco_pairs))
    out.append(("caters", "caters/caters_evaluation/train/batch_1.txt",
                lambda root: load_caters(root / "caters", split="train", name="caters",
                                         max_stories=sizes.caters_stories,
                                         max_pairs_per_story=sizes.caters_per_story, seed=seed),
                sizes.caters_stories))
    out.append(("mt-bench", mt_bench,
                whole(mt_bench, sizes.mt_bench_pairs, sizes.mt_bench_per_question),
                sizes.mt_bench_pairs))

    def llmbar(root: Path) -> Dataset:
        parts = [replace(load_dataset(root / f"llmbar/{sub}/dataset.json"), name=short)
                 for sub, short in (("LLMBar_Natural", "natural"), ("CaseStudy_Normal", "normal"))]
        return subsample_by_context(combine("llmbar-clean", parts), sizes.llmbar_pairs, seed)
    out.append(("llmbar-clean", "llmbar/LLMBar_Natural/dataset.json", llmbar,
                sizes.llmbar_pairs))
    for sub in sizes.llmbar_adversarial:
        short = ADVERSARIAL_SUBSETS[sub]
        rel = f"llmbar/{sub}/dataset.json"
        out.append((short, rel, whole(rel, sizes.llmbar_adversarial_pairs),
                    sizes.llmbar_adversarial_pairs))
    return out


def replication_files(sizes: ReplicationSizes = ReplicationSizes()) -> list[str]:
    """The files (paths under the data folder) the replication reads at ``sizes``, each once:
    what a folder given as the seed experiments' data must hold some of."""
    return list(dict.fromkeys(rel for _, rel, _, size in _entries(sizes, 0) if size != 0))


def summeval_names(names) -> list[str]:
    """The SummEval and NEWSROOM aspects among ``names`` (the thesis tables)."""
    return [n for n in names if n.startswith(("summeval-", "newsroom-"))]


def shifted_names(names) -> list[str]:
    """LLMBar's Adversarial subsets among ``names``: only Figure 4 tests on them."""
    return [n for n in names if n in ADVERSARIAL_SUBSETS.values()]


def comparison_names(names, kinds: dict[str, str]) -> list[str]:
    """The comparison datasets of the transfer; one aspect stands for SummEval and one for
    NEWSROOM (an article's aspects share their prompts but the aspect); the Adversarial
    subsets are Figure 4's alone."""
    return [n for n in names if kinds[n] == "comparison" and n not in shifted_names(names)
            and not (n.startswith(("summeval-", "newsroom-"))
                     and n not in ("summeval-coherence", "newsroom-coherence"))]


def replication_datasets(root: str | Path, sizes: ReplicationSizes = ReplicationSizes(), *,
                         seed: int = 0, log=print) -> dict[str, Dataset]:
    """``{name: Dataset}`` of every replication dataset found under ``root`` (a missing folder
    or file is skipped with a printed reason)."""
    root = Path(root)
    if not root.is_dir():
        log(f"replication data skipped: {root} does not exist (a clone without ../shared)")
        return {}
    out = {}
    for name, rel, load, size in _entries(sizes, seed):
        if size == 0:
            log(f"{name} left out: its size is 0 at these sizes")
            continue
        if not (root / rel).is_file():
            log(f"{name} skipped: {root / rel} is missing")
            continue
        ds = load(root)
        out[name] = replace(ds, name=name) if ds.name != name else ds
    return out
