"""Story Cloze CSV files: which of two endings fits a four-sentence story.

Columns ``InputStoryid``, ``InputSentence1``-``4``, ``RandomFifthSentenceQuiz1``/``2`` and
``AnswerRightEnding`` (1 or 2); the story is the context both endings continue."""

from __future__ import annotations

from pathlib import Path

from ppairs_lens.data.reading import (
    ITEM_LABELS,
    PathLike,
    choice,
    dataset_name,
    read_table,
    text,
    unique_text,
)
from ppairs_lens.data.records import Comparison, Dataset

__all__ = ["load_story_cloze"]

_CLOZE_SENTENCES = tuple(f"InputSentence{i}" for i in range(1, 5))
_CLOZE_COLUMNS = ("InputStoryid", *_CLOZE_SENTENCES, "RandomFifthSentenceQuiz1",
                  "RandomFifthSentenceQuiz2", "AnswerRightEnding")


def load_story_cloze(path: PathLike, *, name: str | None = None) -> Dataset:
    """Which of two endings fits a four-sentence story; the story is the context."""
    p = Path(path)
    file = str(p)
    _, rows = read_table(p, _CLOZE_COLUMNS)
    records: list[Comparison] = []
    seen: dict[str, int] = {}
    for row, values in rows:
        story_id = unique_text(values["InputStoryid"], seen, file, row, "InputStoryid",
                               "story id")
        story = " ".join(text(values[c], file, row, c).strip() for c in _CLOZE_SENTENCES)
        end1 = text(values["RandomFifthSentenceQuiz1"], file, row, "RandomFifthSentenceQuiz1")
        end2 = text(values["RandomFifthSentenceQuiz2"], file, row, "RandomFifthSentenceQuiz2")
        label = choice(values["AnswerRightEnding"], ITEM_LABELS, file, row,
                       "AnswerRightEnding", "AnswerRightEnding must be 1 or 2")
        records.append(Comparison(pair_id=story_id, item1=end1.strip(), item2=end2.strip(),
                                  label=label, context=story, context_id=story_id,
                                  item1_id=f"{story_id}/1", item2_id=f"{story_id}/2"))
    return Dataset(name=name or dataset_name(p), kind="comparison", records=records,
                   aspect="plausible", item_name="ending", context_name="story",
                   aspect_description="the more sensible, coherent continuation of the story",
                   source=file, extra={"format": "story-cloze"})
