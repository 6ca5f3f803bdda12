"""Small comparison datasets generated in code: no download, same records for the same seed.

They exist so the whole pipeline (prompts, harvesting, probes, ranking) can be run and tested
on a fresh clone without the real data, on tasks whose answers are certain. Each generator
takes ``(seed, n=None)`` and uses its own ``random.Random(seed)``; labels are exactly balanced
(half label 1, half label 2) so a probe cannot score well by predicting one position.
"""

from __future__ import annotations

import random
from typing import Protocol

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
              label: int, context: str | None = None,
              context_id: str | None = None) -> Comparison:
    """A comparison with the better item placed where ``label`` says; items are
    (id, text, score)."""
    first, second = (better, worse) if label == ITEM1 else (worse, better)
    return Comparison(pair_id=pair_id, item1=first[1], item2=second[1], label=label,
                      context=context, context_id=context_id, item1_id=first[0],
                      item2_id=second[0], score1=first[2], score2=second[2])


def _dataset(name: str, records: list[Comparison], seed: int, **question: str) -> Dataset:
    return Dataset(name=name, kind="comparison", records=records, source="builtin",
                   extra={"format": "builtin", "seed": seed}, **question)


# --------------------------------------------------------------------------------------------

def larger_number(seed: int = 0, n: int | None = None) -> Dataset:
    """Which of two integers (1-999) is larger: the simplest ordinal comparison."""
    n = 400 if n is None else n
    _check_n("larger_number", n, 20000)
    rng = random.Random(seed)
    pairs: set[tuple[int, int]] = set()
    ordered: list[tuple[int, int]] = []
    while len(ordered) < n:
        a, b = rng.sample(range(1, 1000), 2)
        key = (max(a, b), min(a, b))
        if key not in pairs:
            pairs.add(key)
            ordered.append(key)
    records = [_oriented(f"larger_number:{k}", (str(hi), str(hi), float(hi)),
                         (str(lo), str(lo), float(lo)), label)
               for k, ((hi, lo), label) in enumerate(zip(ordered, _labels(n, rng)))]
    return _dataset("larger_number", records, seed, aspect="larger", item_name="number",
                    aspect_description="the greater integer")


# --------------------------------------------------------------------------------------------

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
    country's capital). Records of one country share a ``context_id`` (and no context
    text), so grouped splits keep a country's true statement out of the test set."""
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
            context_id=f"capital:{country}"))
    return _dataset("capital_true", records, seed, aspect="factually correct",
                    item_name="statement", aspect_description="true of the real world")


# --------------------------------------------------------------------------------------------

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
""".split())


def alphabetical(seed: int = 0, n: int | None = None) -> Dataset:
    """Which of two common words comes first in alphabetical order: an ordering the model
    knows but that no surface feature (length, frequency) gives away."""
    n = 300 if n is None else n
    words = sorted(set(WORDS))
    _check_n("alphabetical", n, len(words) * (len(words) - 1) // 2)
    rng = random.Random(seed)
    seen: set[tuple[str, str]] = set()
    ordered: list[tuple[str, str]] = []
    while len(ordered) < n:
        a, b = sorted(rng.sample(words, 2))
        if (a, b) not in seen:
            seen.add((a, b))
            ordered.append((a, b))
    records = [_oriented(f"alphabetical:{k}", (first, first, 1.0), (second, second, 0.0), label)
               for k, ((first, second), label) in enumerate(zip(ordered, _labels(n, rng)))]
    return _dataset("alphabetical", records, seed, aspect="earlier in alphabetical order",
                    item_name="word", aspect_description="comes before the other word in a "
                    "dictionary")


# --------------------------------------------------------------------------------------------

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
_FEELINGS: tuple[tuple[str, ...], ...] = (
    ("{n} said it was the worst day of {p} whole year.",
     "{n} came home furious and in tears.", "By the end, {n} wished the day had never happened."),
    ("{n} felt a little let down by the end of it.", "It was not as much fun as {n} had hoped.",
     "{n} was somewhat disappointed on the way home."),
    ("{n} came home at the usual time.", "Afterwards {n} had dinner and went to bed.",
     "The day passed without anything special happening."),
    ("{n} enjoyed it and would happily go again.", "It was a pleasant day for {n}.",
     "{n} came home in a good mood."),
    ("{n} said it was the best day of {p} whole life.", "{n} was overjoyed and could not stop "
     "smiling.", "For {n}, it was an absolutely wonderful, perfect day."),
)
_PER_PASSAGE = 4  # sentences per passage -> 6 pairs sharing the passage


def story_sentiment(seed: int = 0, n: int | None = None) -> Dataset:
    """Which of two sentences about a short passage is more positive.

    Each passage comes with four sentences of different sentiment levels, giving six
    comparisons that share the passage as context: the case the harvester's prefix sharing
    and grouped splits are built for.
    """
    n = 240 if n is None else n
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
        ctx_id = f"story_sentiment:{k}"
        levels = sorted(rng.sample(range(len(_FEELINGS)), _PER_PASSAGE))
        sentences = [(f"{ctx_id}/s{lv}", rng.choice(_FEELINGS[lv]).format(n=name, p=pronoun),
                      float(lv)) for lv in levels]
        for i in range(len(sentences)):
            for j in range(i + 1, len(sentences)):
                if len(records) < n:
                    worse, better = sentences[i], sentences[j]  # levels ascend
                    records.append(_oriented(f"{ctx_id}:{worse[0].rsplit('/', 1)[1]}|"
                                             f"{better[0].rsplit('/', 1)[1]}", better, worse,
                                             labels[len(records)], passage, ctx_id))
    return _dataset("story_sentiment", records, seed, aspect="positive", item_name="sentence",
                    context_name="passage", aspect_description="expresses a happier, more "
                    "positive feeling about how the day went")


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
