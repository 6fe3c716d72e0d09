"""Named observation layouts: what each column of ``instances`` and each entry of ``context`` is,
its unit and its encoding, so that an env builds its observation by name, a policy reads raw
values back by name (``ObservationSchema.decode``) and each env docstring shows the table
(Gymnasium's CartPole style) generated from the same description.

Encodings map a raw value x (in the feature's unit) into [-1, 1]:

- ``identity``: x itself (flags, fractions);
- ``ratio`` with scale c: x / (x + c) (0.5 means x = c; bounded without clipping; +∞ → 1);
- ``signed_ratio`` with scale c: x / (|x| + c), ±∞ → ±1;
- ``linear`` with scale c: x / c (c the largest value x takes);
- ``one_hot``: a group of entries, 1 at index x, all 0 for none (decoded as −1).

Decoding inverts them in float64 (a ratio of 1 decodes to ∞). Counts (``integer``) are
rounded to the nearest integer, which is exact while the encoded count is below about 10,000
(float32 keeps 24 bits); other units come back as floats, within float32's relative precision
of the encoded value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ENCODINGS = ("identity", "ratio", "signed_ratio", "linear", "one_hot")
INFINITY_STAND_IN = 1e300  # x / (x + c) rounds to exactly 1 for any scale c the schemas use


@dataclass(frozen=True)
class Encoding:
    """How a raw value is written into the observation (see the module docstring)."""

    kind: str
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ENCODINGS:
            raise ValueError(f"unknown encoding {self.kind!r}; known: {list(ENCODINGS)}")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"encoding scale must be positive and finite, got {self.scale!r}")

    def encode(self, raw: np.ndarray | float) -> np.ndarray:
        """float64 observed values of ``raw`` (not for ``one_hot``)."""
        x = np.asarray(raw, dtype=np.float64)
        if self.kind == "ratio":
            with np.errstate(invalid="ignore"):
                return np.where(np.isinf(x), 1.0, x / (x + self.scale))
        if self.kind == "signed_ratio":
            with np.errstate(invalid="ignore"):
                return np.where(np.isinf(x), np.sign(x), x / (np.abs(x) + self.scale))
        if self.kind == "linear":
            return x / self.scale
        if self.kind == "identity":
            return x
        raise ValueError("a one_hot group is encoded by index, not by value")

    def decode(self, observed: np.ndarray | float) -> np.ndarray:
        """float64 raw values of ``observed`` (not for ``one_hot``)."""
        s = np.asarray(observed, dtype=np.float64)
        with np.errstate(divide="ignore"):
            if self.kind == "ratio":
                return self.scale * s / (1.0 - s)
            if self.kind == "signed_ratio":
                return np.where(np.abs(s) >= 1.0, np.copysign(np.inf, s), self.scale * s / (1.0 - np.abs(s)))
        if self.kind == "linear":
            return s * self.scale
        if self.kind == "identity":
            return s
        raise ValueError("a one_hot group is decoded by index, not by value")

    def formula(self, scale_text: str | None = None) -> str:
        """The encoding as text, e.g. ``x / (x + 16)``."""
        c = scale_text or f"{self.scale:g}"
        return {
            "identity": "x", "ratio": f"x / (x + {c})", "signed_ratio": f"x / (|x| + {c})",
            "linear": f"x / {c}", "one_hot": "1 at index x",
        }[self.kind]

    @property
    def bounds(self) -> tuple[float, float]:
        """The smallest and largest observed value."""
        return (-1.0, 1.0) if self.kind == "signed_ratio" else (0.0, 1.0)


IDENTITY = Encoding("identity")
ONE_HOT = Encoding("one_hot")


def ratio(scale: float) -> Encoding:
    return Encoding("ratio", scale)


def signed_ratio(scale: float) -> Encoding:
    return Encoding("signed_ratio", scale)


def linear(scale: float) -> Encoding:
    return Encoding("linear", scale)


@dataclass(frozen=True)
class Field:
    """One named quantity: ``size`` entries (one per slot, tier, stage, ... or a one-hot group),
    each in ``unit``, encoded by ``encoding``. ``integer`` quantities decode to int64 (counts),
    ``unit="flag"`` to bool. ``scales`` optionally gives each entry (each copy, in a ``Block``)
    its own encoding scale."""

    name: str
    unit: str
    encoding: Encoding
    description: str
    size: int = 1
    integer: bool = False
    scales: tuple[float, ...] | None = None
    scale_text: str | None = None  # how the docstring table writes the scale (e.g. "E")
    size_text: str | None = None  # how the docstring table writes the size (e.g. "K")

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise ValueError(f"field {self.name!r}: size must be a non-negative integer, got {self.size!r}")

    @property
    def scalar(self) -> bool:
        """One value (not a vector sized by a dimension such as tiers or stages, even of size 1)."""
        return self.size == 1 and self.size_text is None

    def encoder(self, index: int) -> Encoding:
        return self.encoding if self.scales is None else Encoding(self.encoding.kind, self.scales[index])

    def decode(self, observed: np.ndarray) -> Any:
        """Raw values of this field's entries (last axis), typed by unit; a one-hot group gives
        the index of its 1 (−1 when none)."""
        observed = np.asarray(observed)
        if self.encoding.kind == "one_hot":
            hot = observed > 0.5
            return np.where(hot.any(axis=-1), np.argmax(hot, axis=-1), -1)
        if self.unit == "flag":
            return observed > 0.5
        if self.scales is None:
            raw = self.encoding.decode(observed)
        else:
            raw = np.stack([self.encoder(i).decode(observed[..., i]) for i in range(observed.shape[-1])], axis=-1)
        if self.integer:
            return np.rint(raw).astype(np.int64)
        return raw


@dataclass(frozen=True)
class Block:
    """``count`` consecutive copies of ``fields`` (one per slot, stage, tier, kind), interleaved:
    copy i of field j sits at ``start + i · len(fields) + j``. Each field's ``size`` is 1."""

    name: str
    count: int
    fields: tuple[Field, ...]
    count_text: str | None = None


Entry = Field | Block


def _layout(entries: tuple[Entry, ...]) -> dict[str, np.ndarray]:
    positions: dict[str, np.ndarray] = {}
    start = 0
    for entry in entries:
        if isinstance(entry, Block):
            width = len(entry.fields)
            for j, f in enumerate(entry.fields):
                if f.name in positions:
                    raise ValueError(f"duplicate field name {f.name!r}")
                if f.size != 1:
                    raise ValueError(f"block {entry.name!r}: field {f.name!r} must have size 1")
                positions[f.name] = start + j + width * np.arange(entry.count)
            start += width * entry.count
        else:
            if entry.name in positions:
                raise ValueError(f"duplicate field name {entry.name!r}")
            positions[entry.name] = start + np.arange(entry.size)
            start += entry.size
    return positions


def _fields(entries: tuple[Entry, ...]) -> Iterator[tuple[Field, Block | None]]:
    for entry in entries:
        if isinstance(entry, Block):
            for f in entry.fields:
                yield f, entry
        else:
            yield entry, None


class ColumnEncoder:
    """Applies per-position encodings to the last axis of a float64 array at once. Every
    encoding is x / (k·|x| + c): k = 1 for ratios (x ≥ 0) and signed ratios, 0 for the others
    (c = the scale, 1 for identity); ±∞ encodes to ±1 (it is first clipped to ±1e300, whose
    ratio with any scale rounds to exactly ±1)."""

    def __init__(self, encodings: list[Encoding]) -> None:
        self.size = len(encodings)
        self._k = np.array([1.0 if e.kind in ("ratio", "signed_ratio") else 0.0 for e in encodings])
        self._c = np.array([e.scale if e.kind in ("ratio", "signed_ratio", "linear") else 1.0 for e in encodings])

    @property
    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """(k, c) per position: what a compiled encoder needs to write the same values."""
        return self._k, self._c

    def encode(self, raw: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Encode ``raw`` (float64, last axis of length ``size``; clipped in place) into ``out``."""
        np.minimum(raw, INFINITY_STAND_IN, out=raw)
        np.maximum(raw, -INFINITY_STAND_IN, out=raw)
        denominator = np.abs(raw)
        denominator *= self._k
        denominator += self._c
        return np.divide(raw, denominator, out=out)


@dataclass(frozen=True)
class MaskPart:
    """A named part of the flat action mask, reshaped to ``shape`` (e.g. per kind x choice)."""

    name: str
    shape: tuple[int, ...]
    description: str
    shape_text: str | None = None  # how the docstring table writes the shape (e.g. "N + 1")


@dataclass(frozen=True)
class ObservationSchema:
    """The layout of one env's observation: ``instances`` columns, ``context`` entries and the
    parts of ``action_mask``; ``constants`` are the fixed values the encodings use (slots,
    tiers, episode length, control interval, ...)."""

    env_id: str
    max_instances: int
    instance_fields: tuple[Field, ...]
    context_entries: tuple[Entry, ...]
    mask_parts: tuple[MaskPart, ...]
    constants: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [f.name for f in self.instance_fields]
        if len(names) != len(set(names)):
            raise ValueError(f"duplicate instance feature name in {names}")
        if any(f.size != 1 for f in self.instance_fields):
            raise ValueError("every instance feature is one column (size 1)")
        object.__setattr__(self, "_instance_index", {name: i for i, name in enumerate(names)})
        object.__setattr__(self, "_context_positions", _layout(self.context_entries))
        object.__setattr__(self, "_context_size", sum(len(p) for p in self._context_positions.values()))
        object.__setattr__(self, "_mask_size", sum(int(np.prod(p.shape)) for p in self.mask_parts))
        object.__setattr__(self, "_context_fields", {f.name: f for f, _ in _fields(self.context_entries)})
        object.__setattr__(self, "_instance_by_name", {f.name: f for f in self.instance_fields})
        starts, start = {}, 0
        for part in self.mask_parts:
            starts[part.name] = (start, start + int(np.prod(part.shape)))
            start = starts[part.name][1]
        object.__setattr__(self, "_mask_slices", starts)
        object.__setattr__(self, "_block_fields", {f.name for f, block in _fields(self.context_entries) if block})
        object.__setattr__(self, "_instance_encoder", ColumnEncoder([f.encoding for f in self.instance_fields]))
        position_encodings = [IDENTITY] * self.context_size
        writers = []
        for name, positions in self._context_positions.items():
            f = self._context_fields[name]
            if f.scales is not None and len(f.scales) != len(positions):
                raise ValueError(f"field {name!r}: {len(f.scales)} scales for {len(positions)} entries")
            for i, position in enumerate(positions):
                position_encodings[position] = IDENTITY if f.encoding.kind == "one_hot" else f.encoder(i)
            scalar = f.scalar and f.encoding.kind != "one_hot" and name not in self._block_fields
            single = int(positions[0]) if scalar else None
            writers.append((name, f.encoding.kind == "one_hot", positions, single))
        object.__setattr__(self, "_context_encoder", ColumnEncoder(position_encodings))
        object.__setattr__(self, "_context_writers", tuple(writers))

    # ----------------------------------------------------------------- sizes and positions
    @property
    def instance_encoder(self) -> ColumnEncoder:
        """The encoder of the ``instances`` columns."""
        return self._instance_encoder

    @property
    def context_encoder(self) -> ColumnEncoder:
        """The encoder of the ``context`` positions."""
        return self._context_encoder

    @property
    def instance_feature_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.instance_fields)

    @property
    def context_names(self) -> tuple[str, ...]:
        return tuple(self._context_positions)

    @property
    def context_size(self) -> int:
        return self._context_size

    @property
    def mask_size(self) -> int:
        return self._mask_size

    def instance_column(self, name: str) -> int:
        """Column of instance feature ``name`` in ``observation["instances"]``."""
        if name not in self._instance_index:
            raise KeyError(f"no instance feature {name!r} in {self.env_id}; known: {list(self._instance_index)}")
        return self._instance_index[name]

    def context_positions(self, name: str) -> np.ndarray:
        """Indices of context field ``name`` in ``observation["context"]``."""
        if name not in self._context_positions:
            raise KeyError(f"no context field {name!r} in {self.env_id}; known: {list(self._context_positions)}")
        return self._context_positions[name]

    def instance_field(self, name: str) -> Field:
        self.instance_column(name)
        return self._instance_by_name[name]

    def context_field(self, name: str) -> Field:
        self.context_positions(name)
        return self._context_fields[name]

    # ----------------------------------------------------------------- encoding
    def encode_context(self, raw: Mapping[str, Any]) -> np.ndarray:
        """The float32 context vector from raw values by name (a one-hot field's value is its
        index, −1 for none); every field must be given."""
        if len(raw) != len(self._context_writers):
            self._check_names(raw)
        values = np.zeros(self.context_size)
        for name, one_hot, positions, single in self._context_writers:
            if name not in raw:
                self._check_names(raw)
            value = raw[name]
            if single is not None:
                values[single] = value
            elif one_hot:
                if not -1 <= value < len(positions):
                    raise ValueError(f"{self.env_id} context: {name} index {value} outside [-1, {len(positions)})")
                if value >= 0:
                    values[positions[value]] = 1.0
            else:
                values[positions] = value
        return self._context_encoder.encode(values, np.empty(self.context_size, dtype=np.float32))

    def _check_names(self, raw: Mapping[str, Any]) -> None:
        missing = set(self._context_positions) - set(raw)
        unknown = set(raw) - set(self._context_positions)
        if missing or unknown:
            raise ValueError(f"{self.env_id} context: missing {sorted(missing)}, unknown {sorted(unknown)}")

    def encode(
        self,
        instances: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        action_mask: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """An observation from raw values by name, the inverse of ``decode``: ``instances``
        maps a feature to its value per slot (or one value for every slot), ``context`` a field
        to its value(s); what is not given is 0 (a one-hot field: none), and the mask is all
        valid unless given."""
        raw = np.zeros((self.max_instances, len(self.instance_fields)))
        for name, values in (instances or {}).items():
            raw[:, self.instance_column(name)] = values
        matrix = self._instance_encoder.encode(raw, np.empty(raw.shape, dtype=np.float32))
        given = dict(context or {})
        unknown = set(given) - set(self._context_positions)
        if unknown:
            raise ValueError(f"{self.env_id} context: unknown {sorted(unknown)}")
        defaults = {name: (-1 if one_hot else 0.0) for name, one_hot, *_ in self._context_writers}
        mask = np.ones(self.mask_size, dtype=np.float32) if action_mask is None else np.asarray(action_mask, np.float32)
        if mask.shape != (self.mask_size,):
            raise ValueError(f"{self.env_id}: action_mask needs {self.mask_size} entries, got shape {mask.shape}")
        return {"instances": matrix, "context": self.encode_context({**defaults, **given}), "action_mask": mask}

    def decode(self, observation: Mapping[str, np.ndarray]) -> DecodedObservation:
        """Raw values by name, decoded lazily (see ``DecodedObservation``)."""
        return DecodedObservation(self, observation)

    # ----------------------------------------------------------------- documentation
    def table(self) -> str:
        """The observation as Markdown tables: instance columns, context entries, mask parts."""
        return observation_tables(self.instance_fields, self.context_entries, self.mask_parts)


def _row(num: str, f: Field) -> str:
    low, high = f.encoding.bounds
    return f"| {num} | ``{f.name}``: {f.description} | {f.unit} | {f.encoding.formula(f.scale_text)} | {low:g} | {high:g} |"


def observation_tables(
    instance_fields: tuple[Field, ...], context_entries: tuple[Entry, ...], mask_parts: tuple[MaskPart, ...]
) -> str:
    """Markdown tables (Gymnasium's CartPole style: Num | Observation | ... | Min | Max) of the
    instance columns, the context entries and the mask parts; sizes and scales given as text
    (``size_text``, ``scale_text``) appear as such, e.g. ``7 + K``."""
    header = ["| Num | Observation | Unit | Encoding | Min | Max |", "|---|---|---|---|---|---|"]
    lines = ["``instances``: one row per instance slot (an empty slot is all 0), columns:", "", *header]
    start = "0"
    for f in instance_fields:
        size = f.size_text or str(f.size)
        lines.append(_row(start if size == "1" else f"{start} … {_advance(start, size + ' − 1')}", f))
        start = _advance(start, size)
    lines += ["", "``context``:", "", *header]
    start = "0"
    for f, block in _fields(context_entries):
        if block is None:
            size = f.size_text or str(f.size)
            lines.append(_row(start if size == "1" else f"{start} … {_advance(start, size + ' − 1')}", f))
            start = _advance(start, size)
            continue
        j = block.fields.index(f)
        count = block.count_text or str(block.count)
        lines.append(_row(f"{_advance(start, f'{len(block.fields)}i + {j}')}, i < {count}", f))
        if f is block.fields[-1]:
            start = _advance(start, f"{len(block.fields)}{count}" if not count.isdigit() else str(len(block.fields) * int(count)))
    lines += ["", "``action_mask`` (1.0 where the action is valid), in parts:", "", "| Part | Shape | Meaning |", "|---|---|---|"]
    for part in mask_parts:
        shape = part.shape_text or " x ".join(str(n) for n in part.shape)
        lines.append(f"| ``{part.name}`` | {shape} | {part.description} |")
    return "\n".join(lines)


def with_observation_tables(doc: str | None, tables: str) -> str:
    """``doc`` (a class docstring) with an ``## Observation tables`` section holding ``tables``."""
    body = "\n".join(("    " + line).rstrip() for line in tables.splitlines())
    return f"{(doc or '').rstrip()}\n\n    ## Observation tables\n    Generated from ``envs.schema`` (the env's ``schema``).\n\n{body}\n    "


def _terms(text: str) -> dict[str, int]:
    """``"7 + 3S − 1"`` → {"": 6, "S": 3}: a sum of integer multiples of named sizes."""
    terms: dict[str, int] = {}
    for sign, term in zip([1] + [1 if op == "+" else -1 for op in text.split()[1::2]], text.split()[::2]):
        digits = len(term) - len(term.lstrip("0123456789"))
        name = term[digits:]
        coefficient = int(term[:digits]) if digits else 1
        terms[name] = terms.get(name, 0) + sign * coefficient
    return terms


def _text(terms: dict[str, int]) -> str:
    parts = [f"{c if c != 1 else ''}{name}" for name, c in terms.items() if name and c]
    number = terms.get("", 0)
    if number > 0 or not parts:
        parts.insert(0, str(number))
    text = " + ".join(parts)
    return f"{text} − {-number}" if number < 0 else text


def _advance(start: str, size: str) -> str:
    """``start + size`` as text, like terms added: ``7 + K``, ``6 + 5N``, ``29 + 2K``."""
    terms = _terms(start)
    for name, c in _terms(size).items():
        terms[name] = terms.get(name, 0) + c
    return _text(terms)


class _Lazy(Mapping[str, Any]):
    """Values decoded on first access and kept."""

    def __init__(self, names: tuple[str, ...], decode: Any) -> None:
        self._names, self._decode, self._values = names, decode, {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            self._values[name] = self._decode(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class DecodedObservation:
    """An observation's raw values by name: ``instances[name]`` (one value per slot),
    ``context[name]`` (a scalar for a one-entry field, else an array) and ``mask(part)``
    (booleans shaped as the part)."""

    def __init__(self, schema: ObservationSchema, observation: Mapping[str, np.ndarray]) -> None:
        self.schema = schema
        self._observation = observation
        self.instances: Mapping[str, Any] = _Lazy(schema.instance_feature_names, self._instance)
        self.context: Mapping[str, Any] = _Lazy(schema.context_names, self._context)

    def _instance(self, name: str) -> np.ndarray:
        column = self.schema.instance_column(name)
        return self.schema.instance_field(name).decode(np.asarray(self._observation["instances"])[:, column])

    def _context(self, name: str) -> Any:
        f = self.schema.context_field(name)
        values = f.decode(np.asarray(self._observation["context"])[self.schema.context_positions(name)])
        if f.encoding.kind == "one_hot":
            return int(values)
        if f.scalar and name not in self.schema._block_fields:
            return values[0].item()
        return values

    def mask(self, part: str | None = None) -> np.ndarray:
        """The action mask as booleans: the whole flat mask, or ``part`` in its shape."""
        flat = np.asarray(self._observation["action_mask"]).reshape(-1) > 0.5
        if part is None:
            return flat
        slices = self.schema._mask_slices
        if part not in slices:
            raise KeyError(f"no mask part {part!r} in {self.schema.env_id}; known: {list(slices)}")
        start, stop = slices[part]
        shape = next(p.shape for p in self.schema.mask_parts if p.name == part)
        return flat[start:stop].reshape(shape)
