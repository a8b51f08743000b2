"""Parquet export: one row per label, the labeled steps as list columns, written in row groups.

With every completion, a label has one row more for each rated alternative it did not continue
with (the steps before it, then it; `alternative_at` is its step's index, null on the label's own
row), and `human_written` marks the steps the labeler wrote.

Each row group is encoded as soon as it is full and its bytes handed out, so an export of any
size holds one row group in memory.
"""

from __future__ import annotations

import io
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from app.exports.query import LabelRow, labeler_of
from app.exports.trajectory import RatedStep, alternatives, trajectory

ROWS_PER_GROUP = 2000

SCHEMA = pa.schema(
    [
        ("label_id", pa.int64()),
        ("labeler", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("generation", pa.int32()),
        ("is_quality_control", pa.bool_()),
        ("is_initial_screening", pa.bool_()),
        ("finish_reason", pa.string()),
        ("finish_note", pa.string()),
        ("total_time_ms", pa.int64()),
        ("problem_id", pa.int64()),
        ("problem_unique_id", pa.string()),
        ("problem", pa.string()),
        ("ground_truth_answer", pa.string()),
        ("solution_id", pa.int64()),
        ("solution_origin", pa.string()),
        ("final_answer", pa.string()),
        ("answer_grade", pa.string()),
        ("verifier_score", pa.float64()),
        ("steps", pa.list_(pa.string())),
        ("ratings", pa.list_(pa.int8())),
        ("flagged", pa.list_(pa.bool_())),
        ("source", pa.string()),
        ("source_detail", pa.string()),
        ("labeling_mode", pa.string()),
    ]
)
EVERY_COMPLETION_SCHEMA = SCHEMA.append(pa.field("human_written", pa.list_(pa.bool_()))).append(
    pa.field("alternative_at", pa.int32())
)


class _Collector(io.RawIOBase):
    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.parts.append(chunk)
        self.position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


class ParquetStream:
    def __init__(self, every_completion: bool = False) -> None:
        self._collector = _Collector()
        # An explicit PythonFile, closed by us: left to the writer, pyarrow aborts the
        # interpreter at exit while finalising it.
        self._file = pa.PythonFile(self._collector, mode="w")
        self._every_completion = every_completion
        self._schema = EVERY_COMPLETION_SCHEMA if every_completion else SCHEMA
        self._writer = pq.ParquetWriter(self._file, self._schema, compression="zstd")
        self._columns: dict[str, list[Any]] = {name: [] for name in self._schema.names}
        self.pending = 0

    def add(self, row: LabelRow) -> int:
        """Add the label's rows; returns how many."""
        solution_steps, label_steps = orjson.loads(row.solution_steps), orjson.loads(row.label_steps)
        self._add(row, trajectory(solution_steps, label_steps), None)
        if not self._every_completion:
            return 1
        added = 1
        for alternative in alternatives(solution_steps, label_steps):
            self._add(row, alternative.steps, alternative.at)
            added += 1
        return added

    def _add(self, row: LabelRow, steps: list[RatedStep], alternative_at: int | None) -> None:
        values = {
            "label_id": row.label_id,
            "labeler": labeler_of(row),
            "created_at": row.created_at,
            "generation": row.generation,
            "is_quality_control": row.is_quality_control,
            "is_initial_screening": row.is_initial_screening,
            "finish_reason": row.finish_reason.value if row.finish_reason else None,
            "finish_note": row.finish_note,
            "total_time_ms": row.total_time_ms,
            "problem_id": row.problem_id,
            "problem_unique_id": row.problem_unique_id,
            "problem": row.statement,
            "ground_truth_answer": row.answer,
            "solution_id": row.solution_id,
            # Where the solution came from (its file and line, the keys its file gave beside the
            # steps, such as the model that wrote it; a generator's settings), as JSON text.
            # Keys sorted: PostgreSQL's jsonb gives them in an order of its own.
            "solution_origin": orjson.dumps(orjson.loads(row.solution_origin), option=orjson.OPT_SORT_KEYS).decode(),
            "final_answer": row.final_answer,
            "answer_grade": row.answer_grade.value,
            "verifier_score": row.verifier_score,
            "steps": [s.text for s in steps],
            "ratings": [s.rating for s in steps],
            "flagged": [s.flagged for s in steps],
            "source": row.source.value,
            "source_detail": row.source_detail,
            "labeling_mode": row.labeling_mode.value if row.labeling_mode else None,
        }
        if self._every_completion:
            values["human_written"] = [s.human for s in steps]
            values["alternative_at"] = alternative_at
        for name, value in values.items():
            self._columns[name].append(value)
        self.pending += 1

    def flush(self) -> bytes:
        """Write the rows added so far as one row group; the bytes encoded since the last call."""
        if self.pending:
            self._writer.write_table(pa.Table.from_pydict(self._columns, schema=self._schema))
            for values in self._columns.values():
                values.clear()
            self.pending = 0
        return self._collector.take()

    def close(self) -> bytes:
        tail = self.flush()
        self._writer.close()
        self._file.close()
        return tail + self._collector.take()
