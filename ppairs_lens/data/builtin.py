"""Small comparison datasets generated in code, so the whole pipeline runs on a fresh clone on
tasks whose answers are certain. Each generator takes ``(seed, n=None)`` with its own
``random.Random(seed)``; labels are exactly balanced so predicting one position scores chance.

Every record's ``group_id`` (number or word block, country, template pool) makes held-out
pairs use items never seen in training: without it a lookup of each item's training win rate,
with no model at all, scores far above chance on the test pairs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, TypeVar

from ppairs_lens.data.records import ITEM1, ITEM2, Comparison, Dataset
from ppairs_lens.errors import DataError

__all__ = ["BUILTIN", "BUILTIN_NAMES", "BuiltinFactory", "alphabetical", "builtin_dataset",
           "capital_true", "larger_number", "story_sentiment"]


class BuiltinFactory(Protocol):
    """A built-in dataset generator: ``factory(seed)`` or ``factory(seed, n)``."""

    def __call__(self, seed: int = 0, n: int | None = None) -> Dataset: ...


def _labels(n: int, rng: random.Random) -> list[int]:
    """Exactly balanced labels in random order (n odd: one more label 1)."""
    labels = [ITEM1] * ((n + 1) // 2) + [ITEM2] * (n // 2)
    rng.shuffle(labels)
    return labels


def _check_n(name: str, n: int, most: int) -> None:
    if not 1 <= n <= most:
        raise DataError(f"built-in dataset {name!r} has between 1 and {most} comparisons, "
                        f"asked for {n}", field="n")


def _oriented(pair_id: str, better: tuple[str, str, float], worse: tuple[str, str, float],
              label: int, context: str | None = None, context_id: str | None = None,
              group_id: str | None = None) -> Comparison:
    """The better item placed where ``label`` says; items are (id, text, score)."""
    first, second = (better, worse) if label == ITEM1 else (worse, better)
    return Comparison(pair_id=pair_id, item1=first[1], item2=second[1], label=label,
                      context=context, context_id=context_id, item1_id=first[0],
                      item2_id=second[0], score1=first[2], score2=second[2], group_id=group_id)


def _dataset(name: str, records: list[Comparison], seed: int, group_by: str,
             **question: str) -> Dataset:
    return Dataset(name=name, kind="comparison", records=records, source="builtin",
                   extra={"format": "builtin", "seed": seed, "group_by": group_by}, **question)


T = TypeVar("T")


def _blocks(items: Sequence[T], n_blocks: int, rng: random.Random) -> list[list[T]]:
    """``items`` shuffled and dealt into ``n_blocks`` disjoint blocks of (nearly) equal size."""
    order = list(items)
    rng.shuffle(order)
    return [order[b::n_blocks] for b in range(n_blocks)]


def _block_capacity(blocks: Sequence[Sequence[T]]) -> int:
    return sum(len(b) * (len(b) - 1) // 2 for b in blocks)


def _pairs_in_blocks(blocks: Sequence[Sequence[T]], n: int,
                     rng: random.Random) -> list[tuple[int, T, T]]:
    """``n`` distinct pairs (block, a, b) inside blocks, dealt in seeded rounds over them."""
    free = []
    for block in blocks:
        pairs = [(i, j) for i in range(len(block)) for j in range(i + 1, len(block))]
        rng.shuffle(pairs)
        free.append(pairs)
    out: list[tuple[int, T, T]] = []
    while len(out) < n:
        for b in rng.sample(range(len(blocks)), len(blocks)):
            if free[b] and len(out) < n:
                i, j = free[b].pop()
                out.append((b, blocks[b][i], blocks[b][j]))
    return out


def larger_number(seed: int = 0, n: int | None = None, n_blocks: int = 40) -> Dataset:
    """Which of two integers (1-999) is larger, pairs drawn inside ``n_blocks`` number blocks."""
    n = 400 if n is None else n
    rng = random.Random(seed)
    blocks = _blocks(range(1, 1000), n_blocks, rng)
    _check_n("larger_number", n, _block_capacity(blocks))
    chosen = [(b, max(x, y), min(x, y)) for b, x, y in _pairs_in_blocks(blocks, n, rng)]
    records = [_oriented(f"larger_number:{k}", (str(hi), str(hi), float(hi)),
                         (str(lo), str(lo), float(lo)), label,
                         group_id=f"larger_number:block{b}")
               for k, ((b, hi, lo), label) in enumerate(zip(chosen, _labels(n, rng)))]
    return _dataset("larger_number", records, seed, "number block", aspect="larger",
                    item_name="number", aspect_description="the greater integer")


#: Well-known countries and their capitals (no disputed or recently changed ones).
CAPITALS: tuple[tuple[str, str], ...] = (
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"),
    ("Portugal", "Lisbon"), ("United Kingdom", "London"), ("Ireland", "Dublin"),
    ("Netherlands", "Amsterdam"), ("Belgium", "Brussels"), ("Austria", "Vienna"),
    ("Switzerland", "Bern"), ("Poland", "Warsaw"), ("Czech Republic", "Prague"),
    ("Hungary", "Budapest"), ("Greece", "Athens"), ("Sweden", "Stockholm"),
    ("Norway", "Oslo"), ("Denmark", "Copenhagen"), ("Finland", "Helsinki"),
    ("Iceland", "Reykjavik"), ("Russia", "Moscow"), ("Ukraine", "Kyiv"),
    ("Romania", "Bucharest"), ("Bulgaria", "Sofia"), ("Serbia", "Belgrade"),
    ("Croatia", "Zagreb"), ("Turkey", "Ankara"), ("Egypt", "Cairo"), ("Kenya", "Nairobi"),
    ("Ethiopia", "Addis Ababa"), ("Nigeria", "Abuja"), ("Ghana", "Accra"),
    ("Morocco", "Rabat"), ("Algeria", "Algiers"), ("Tunisia", "Tunis"), ("Senegal", "Dakar"),
    ("Japan", "Tokyo"), ("China", "Beijing"), ("South Korea", "Seoul"),
    ("Thailand", "Bangkok"), ("Vietnam", "Hanoi"), ("Philippines", "Manila"),
    ("Indonesia", "Jakarta"), ("India", "New Delhi"), ("Pakistan", "Islamabad"),
    ("Bangladesh", "Dhaka"), ("Nepal", "Kathmandu"), ("Iran", "Tehran"), ("Iraq", "Baghdad"),
    ("Saudi Arabia", "Riyadh"), ("Australia", "Canberra"), ("New Zealand", "Wellington"),
    ("Canada", "Ottawa"), ("United States", "Washington, D.C."), ("Mexico", "Mexico City"),
    ("Cuba", "Havana"), ("Brazil", "Brasilia"), ("Argentina", "Buenos Aires"),
    ("Chile", "Santiago"), ("Peru", "Lima"), ("Colombia", "Bogota"), ("Venezuela", "Caracas"),
)


def capital_true(seed: int = 0, n: int | None = None) -> Dataset:
    """Which of two statements about a country's capital is true (the other names another
    country's capital); a country's records share a ``context_id`` and ``group_id``."""
    n = 240 if n is None else n
    _check_n("capital_true", n, len(CAPITALS) * (len(CAPITALS) - 1))
    rng = random.Random(seed)
    chosen: list[tuple[int, int]] = []
    used: set[tuple[int, int]] = set()
    while len(chosen) < n:  # rounds over all countries keep them evenly represented
        for country in rng.sample(range(len(CAPITALS)), len(CAPITALS)):
            free = [w for w in range(len(CAPITALS)) if w != country and (country, w) not in used]
            if free and len(chosen) < n:
                wrong = rng.choice(free)
                used.add((country, wrong))
                chosen.append((country, wrong))
    records = []
    for k, ((c, w), label) in enumerate(zip(chosen, _labels(n, rng))):
        country, capital = CAPITALS[c]
        wrong = CAPITALS[w][1]
        records.append(_oriented(
            f"capital_true:{k}", (f"{country}/{capital}", f"The capital of {country} is "
                                  f"{capital}.", 1.0),
            (f"{country}/{wrong}", f"The capital of {country} is {wrong}.", 0.0), label,
            context_id=f"capital:{country}", group_id=country))
    return _dataset("capital_true", records, seed, "country", aspect="factually correct",
                    item_name="statement", aspect_description="true of the real world")


#: Common English words, all lower case and distinct.
WORDS: tuple[str, ...] = tuple("""
apple bread chair dance eagle field garden house island jacket kettle ladder mountain
needle orange pencil queen river summer table umbrella valley window yellow zebra anchor
basket candle doctor engine forest guitar hammer insect jungle kitchen lemon market number
ocean pepper quiet rabbit silver ticket uncle violin wagon young zipper animal bridge cloud
dinner energy family ginger honey iron joke king lizard mirror night onion paper question
rocket shadow tiger under village winter yard zero arrow butter castle desert elbow feather
glass horse idea jelly kite letter magnet nature office pillow quilt robot sugar tunnel
unicorn vessel whale yogurt blanket circle dragon empire finger gravel harbor ivory journey
lantern meadow nickel orbit planet rescue saddle thunder velvet wizard bottle cactus dolphin
fabric goose helmet igloo kernel lobster marble noodle oyster parrot raven spider tomato
acorn bucket cotton daisy engineer flute grape hollow pumpkin kitten lamp mango napkin oven
puzzle radio sandal towel uniform vase wallet almond beetle cabin diamond envelope fountain
giraffe hockey icicle jigsaw koala lagoon muffin nephew olive peanut quarry ribbon salmon
teacup utensil volcano walnut yacht zigzag badge canoe dentist elephant festival gecko
hazel index juice kayak lettuce melon nest ostrich pebble puppet rainbow scarf trumpet
willow
""".split())


def alphabetical(seed: int = 0, n: int | None = None, block_size: int = 10) -> Dataset:
    """Which of two common words comes first alphabetically: an ordering the model knows but
    no surface feature (length, frequency) gives away; pairs drawn inside word blocks."""
    n = 300 if n is None else n
    words = sorted(set(WORDS))
    rng = random.Random(seed)
    blocks = _blocks(words, max(1, len(words) // block_size), rng)
    _check_n("alphabetical", n, _block_capacity(blocks))
    chosen = [(b, *sorted((x, y))) for b, x, y in _pairs_in_blocks(blocks, n, rng)]
    records = [_oriented(f"alphabetical:{k}", (first, first, 1.0), (second, second, 0.0), label,
                         group_id=f"alphabetical:block{b}")
               for k, ((b, first, second), label) in enumerate(zip(chosen, _labels(n, rng)))]
    return _dataset("alphabetical", records, seed, "word block",
                    aspect="earlier in alphabetical order", item_name="word",
                    aspect_description="comes before the other word in a dictionary")


_NAMES: tuple[tuple[str, str], ...] = (
    ("Maya", "her"), ("Tom", "his"), ("Priya", "her"), ("Daniel", "his"), ("Lena", "her"),
    ("Omar", "his"), ("Sofia", "her"), ("Jack", "his"), ("Aisha", "her"), ("Leo", "his"),
    ("Hannah", "her"), ("Ben", "his"), ("Chloe", "her"), ("Ravi", "his"), ("Emma", "her"),
)
_OUTINGS: tuple[str, ...] = (
    "spent Saturday at the lake with {p} brother", "went to the county fair with {p} cousins",
    "took the early train to the city to visit {p} aunt", "went hiking in the hills with {p} "
    "dog", "spent the afternoon at the beach with {p} friends", "went to a concert in the park",
    "helped {p} grandfather repair the garden fence", "visited the science museum with {p} "
    "class", "went camping by the river for the weekend", "cooked dinner for {p} whole family",
)
#: Sentences about how the day went, by sentiment level (0 most negative, 4 most positive).
#: Template k of every level forms pool k; a passage draws all its sentences from one pool.
_FEELINGS: tuple[tuple[str, ...], ...] = (
    ("{n} said it was the worst day of {p} whole year.",
     "{n} came home furious and in tears.",
     "By the end, {n} wished the day had never happened.",
     "{n} was miserable and hated every minute of it.",
     "It was a disaster, and {n} felt awful for days afterwards.",
     "{n} called it a horrible, wretched day."),
    ("{n} felt a little let down by the end of it.",
     "It was not as much fun as {n} had hoped.",
     "{n} was somewhat disappointed on the way home.",
     "{n} found it a bit dull and was slightly bored.",
     "Parts of it were tiresome, and {n} was mildly annoyed.",
     "{n} came back a little grumpy."),
    ("{n} came home at the usual time.",
     "Afterwards {n} had dinner and went to bed.",
     "The day passed without anything special happening.",
     "{n} got back in the late afternoon.",
     "That evening {n} read for a while and then slept.",
     "{n} took the bus home and unpacked {p} bag."),
    ("{n} enjoyed it and would happily go again.",
     "It was a pleasant day for {n}.",
     "{n} came home in a good mood.",
     "{n} had a nice time and smiled on the way home.",
     "{n} thought it was a pretty good day.",
     "It was fun, and {n} felt cheerful afterwards."),
    ("{n} said it was the best day of {p} whole life.",
     "{n} was overjoyed and could not stop smiling.",
     "For {n}, it was an absolutely wonderful, perfect day.",
     "{n} was thrilled and called it a magical, unforgettable day.",
     "{n} felt completely delighted, happier than ever before.",
     "It was pure joy from start to finish for {n}."),
)
N_POOLS = len(_FEELINGS[0])
_PER_PASSAGE = 4  # sentences per passage -> 6 pairs sharing the passage


def story_sentiment(seed: int = 0, n: int | None = None) -> Dataset:
    """Which of two sentences about a short passage is more positive.

    Each passage has four sentences of different levels, six comparisons sharing it as context
    (what prefix sharing and ranking within contexts are built for). ``item_id`` is the
    template (``"feel:<level>:<template>"``); each passage draws from one of six template pools
    (passages spread evenly), and ``group_id`` is the pool, so test templates are unseen.
    """
    n = 360 if n is None else n
    n_pairs = _PER_PASSAGE * (_PER_PASSAGE - 1) // 2
    _check_n("story_sentiment", n, len(_NAMES) * len(_OUTINGS) * n_pairs)
    rng = random.Random(seed)
    scenes = [(who, what) for who in range(len(_NAMES)) for what in range(len(_OUTINGS))]
    rng.shuffle(scenes)
    labels = _labels(n, rng)
    records: list[Comparison] = []
    for k, (who, what) in enumerate(scenes):
        if len(records) >= n:
            break
        name, pronoun = _NAMES[who]
        passage = f"{name} {_OUTINGS[what].format(p=pronoun)}."
        ctx_id, pool = f"story_sentiment:{k}", k % N_POOLS
        levels = sorted(rng.sample(range(len(_FEELINGS)), _PER_PASSAGE))
        sentences = [(f"feel:{lv}:{pool}", _FEELINGS[lv][pool].format(n=name, p=pronoun),
                      float(lv)) for lv in levels]
        for i in range(len(sentences)):
            for j in range(i + 1, len(sentences)):
                if len(records) < n:
                    worse, better = sentences[i], sentences[j]  # levels ascend
                    records.append(_oriented(
                        f"{ctx_id}:s{int(worse[2])}|s{int(better[2])}", better, worse,
                        labels[len(records)], passage, ctx_id, f"story_sentiment:pool{pool}"))
    return _dataset("story_sentiment", records, seed, "sentence template pool",
                    aspect="positive", item_name="sentence", context_name="passage",
                    aspect_description="expresses a happier, more positive feeling about how "
                    "the day went")


#: Built-in datasets by name; each is ``factory(seed)`` (``n`` optional).
BUILTIN: dict[str, BuiltinFactory] = {
    "larger_number": larger_number,
    "capital_true": capital_true,
    "alphabetical": alphabetical,
    "story_sentiment": story_sentiment,
}

#: The built-in dataset names, in listing order: the default set of datasets to run on.
BUILTIN_NAMES: tuple[str, ...] = tuple(BUILTIN)


def builtin_dataset(name: str, seed: int = 0, n: int | None = None) -> Dataset:
    """A built-in dataset by name, with ``n`` comparisons (each has its own default)."""
    if name not in BUILTIN:
        raise DataError(f"unknown built-in dataset {name!r}; built-ins: {', '.join(BUILTIN)}",
                        field="name")
    return BUILTIN[name](seed, n)
