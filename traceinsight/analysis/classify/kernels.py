"""Kernel name (and args) → family, precision, tensor-core use, library, and the rule that said so.

The rules are data (:mod:`traceinsight.analysis.classify.rules`); this module runs them. Names
are classified as a polars column, each distinct name once, all rules compiled once by
polars' regex engine; :func:`classify` answers one name (cached) for code that has a single
name at hand. Every answer carries the id of the rule that matched, so a reader can see why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from typing import Any

import polars as pl

from traceinsight.analysis.classify import rules as R

COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "family": pl.String,
    "subfamily": pl.String,
    "collective": pl.String,
    "precision": pl.String,
    "tensor_core": pl.Boolean,
    "library": pl.String,
    "rule": pl.String,
    "element_bytes": pl.Int64,
    "alignment": pl.Int64,
}
UNMATCHED_RULE = "none"
# Classes already computed, by (vendor, name); cleared past this many names.
_CLASSES: dict[tuple[str | None, str], tuple[object, ...]] = {}
MAX_CACHED_CLASSES = 200_000


@dataclass(frozen=True)
class KernelClass:
    """What one kernel is, as far as its name (and args) tell.

    ``precision`` is ``"unknown"`` and ``tensor_core`` is None where the name does not say;
    ``rule`` is the id of the rule that matched (``"none"`` when none did: family ``other``).
    ``collective`` is set for communication kernels whose collective is known.
    ``element_bytes`` is the size of the element type the name states (``OpaqueType<2>`` is 2,
    ``float`` 4; None where it states none or an integer type); ``alignment`` the smallest
    operand alignment in elements a GEMM/conv name states (CUTLASS ``align1``, cuBLAS
    ``aligna4``; below 8 for 16-bit types means a misaligned shape forced a slower kernel).
    """

    name: str
    family: str
    precision: str
    tensor_core: bool | None
    library: str
    rule: str
    subfamily: str | None = None
    collective: str | None = None
    element_bytes: int | None = None
    alignment: int | None = None

    @property
    def is_matrix(self) -> bool:
        """GEMM, convolution or attention: work that tensor/matrix cores can do."""
        return self.family in R.MATRIX_FAMILIES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _norm_vendor(vendor: str | None) -> str | None:
    if vendor is None:
        return None
    v = vendor.strip().lower()
    return {"xpu": "intel", "rocm": "amd", "hip": "amd", "cuda": "nvidia"}.get(v, v) or None


@cache
def _rx(pattern: str) -> str:
    """``pattern`` with ASCII word boundaries and classes: kernel names are ASCII, and a
    Unicode ``\\b`` keeps the regex engine off its fast automaton (several times slower)."""
    return pattern.replace("\\b", "(?-u:\\b)").replace("\\w", "[0-9A-Za-z_]").replace("\\d", "[0-9]")


def _first(name: pl.Expr, table: Iterable[tuple[str, Any]], dtype: Any = pl.String) -> pl.Expr:
    """The value of the first (pattern, value) whose pattern is found in ``name``, else null."""
    rows = list(table)
    if not rows:
        return pl.lit(None, dtype=dtype)
    # the index of the first match, mapped to its value (cheaper than coalescing values)
    first = pl.coalesce([pl.when(name.str.contains(_rx(p))).then(pl.lit(i, dtype=pl.Int32)) for i, (p, _) in enumerate(rows)])
    return first.replace_strict({i: v for i, (_, v) in enumerate(rows)}, default=None, return_dtype=dtype)


def _word_pattern(word: str, whole: bool) -> str:
    text = re.escape(word)
    if whole and (word[0].isalnum() or word[0] == "_"):
        text = r"\b" + text
    if whole and (word[-1].isalnum() or word[-1] == "_"):
        text = text + r"\b"
    return text


def _leftmost(name: pl.Expr, words: tuple[tuple[str, str, bool], ...]) -> pl.Expr:
    """The value of the word that occurs first (leftmost) in ``name``."""
    alternation = "|".join(_word_pattern(w, whole) for w, _, whole in words)
    token = name.str.extract(_rx(f"({alternation})"), 1)
    return token.replace_strict({w: v for w, v, _ in words}, default=None, return_dtype=pl.String)


def _token(name: pl.Expr) -> pl.Expr:
    """The leftmost type word of a template-free name (``_bf16_``, ``bf16xbf16xmxfp4``)."""
    words = "|".join(w for w, _ in R.TOKEN_WORDS)
    token = name.str.extract(f"(?:^|[^A-Za-z0-9])({words})(?:[^A-Za-z]|x|$)", 1)
    return token.replace_strict(dict(R.TOKEN_WORDS), default=None, return_dtype=pl.String)


def _template(name: pl.Expr, scheme: str) -> pl.Expr:
    """The element type named in a C++ template name.

    ``template``: in ATen's elementwise kernels the functor's lambda states the data type
    (``{lambda(float, float)#1}``), past sizes and index types (``elementwise_kernel_with_index
    <int, ...>``) and the op's scalar parameters (``nan_to_num(..., optional<double>)``), so a
    float type in a lambda decides there; elsewhere (and where no lambda names one) the first
    type of the whole name. A bool decides only when nothing else is named. ``wtemplate``:
    the first type of the whole name (casts: ``bfloat16_copy_kernel_cuda{lambda(float)}``
    writes bf16). ``ftemplate``: floating-point types only. (Names without C++ types fall back
    to the type words of :func:`_token`, in :func:`_precision_of`.)
    """
    types = R.LEFTMOST_SCHEMES[scheme]
    whole = _leftmost(name, types)
    if scheme == "template":
        lambdas = name.str.extract_all(r"\{lambda\([^)]*\)").list.join(" ")
        in_lambda = _leftmost(lambdas, R.LEFTMOST_SCHEMES["ftemplate"])
        whole = pl.when(name.str.contains("elementwise")).then(pl.coalesce(in_lambda, whole)).otherwise(whole)
    if scheme != "ftemplate":
        whole = pl.coalesce(whole, pl.when(name.str.contains(_rx(R.BOOL_TYPE))).then(pl.lit("int")))
    return whole


def _precision_scheme(name: pl.Expr, scheme: str) -> pl.Expr:
    if scheme in R.LEFTMOST_SCHEMES:
        return _template(name, scheme)
    if scheme == "token":
        return _token(name)
    if scheme == "rng":
        # distribution kernels: <accscalar, ..., normal_and_transform<scalar_t, accscalar_t, ...>>
        # write scalar_t.
        written = name.str.extract(r"_and_transform<([^,>]+)", 1)
        return pl.coalesce(_leftmost(written, R.LEFTMOST_SCHEMES["wtemplate"]), _template(name, "template"))
    return _first(name, R.PRECISION_SCHEMES[scheme])


def _tensor_core_scheme(name: pl.Expr, scheme: str) -> pl.Expr:
    table, default = R.TENSOR_CORE_SCHEMES[scheme]
    found = _first(name, table, pl.Boolean)
    return found if default is None else found.fill_null(pl.lit(default, dtype=pl.Boolean))


def _spec_column(idx: pl.Expr, values: Iterable[str | None]) -> pl.Expr:
    """The rule's value for each row's rule index (null for -1: no rule matched)."""
    return idx.replace_strict(dict(enumerate(values)), default=None, return_dtype=pl.String)


def _rules_for(vendor: str | None) -> list[tuple[int, R.Rule]]:
    return [(i, r) for i, r in enumerate(R.RULES) if r.vendor is None or r.vendor == vendor]


def _tc_spec(value: bool | str | None) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _rule_matcher(pattern: str) -> tuple[str, str]:
    """(column, pattern) to search: a pattern that is case-insensitive throughout is run
    lower-cased against the lower-cased name, where the regex engine's literal prefilters
    work (an ``(?i)`` search over long template names is several times slower)."""
    if pattern.startswith("(?i)") and "\\" not in pattern.replace("\\b", "").replace("\\w", "").replace("\\d", "").replace("\\(", "").replace("\\)", "").replace("\\{", "").replace("\\.", ""):
        return "_lname", _rx(pattern[4:].lower())
    return "name", _rx(pattern)


def _block_pattern(rules: list[tuple[int, R.Rule]]) -> str:
    """One alternation of several rules' patterns (a row none of them matches skips them all)."""
    parts = []
    for _, rule in rules:
        p = rule.pattern
        parts.append(f"(?i:{p[4:]})" if p.startswith("(?i)") else f"(?:{p})")
    return _rx("|".join(parts))


def _match_rules(frame: pl.DataFrame, vendor: str | None, block: int = 8) -> pl.Series:
    """The index of the first rule matching each row (-1: none), trying each rule only on
    the rows no earlier rule claimed; rules are first tried in blocks (one alternation for
    several rules), so a row pays one search per block it does not match."""
    idx = pl.Series("_idx", [-1] * frame.height, dtype=pl.Int32)
    remaining = frame.select("_row", "name", _lname=pl.col("name").str.to_lowercase())
    claimed: list[pl.DataFrame] = []
    active = _rules_for(vendor)
    for b in range(0, len(active), block):
        if remaining.height == 0:
            break
        group = active[b : b + block]
        in_block = remaining.filter(remaining["name"].str.contains(_block_pattern(group)))
        if in_block.height == 0:
            continue
        for i, rule in group:
            if in_block.height == 0:
                break
            column, pattern = _rule_matcher(rule.pattern)
            hit = in_block[column].str.contains(pattern)
            if hit.any():
                claimed.append(in_block.filter(hit).select("_row", pl.lit(i, dtype=pl.Int32).alias("_idx")))
                in_block = in_block.filter(~hit)
        done = pl.concat(claimed)["_row"] if claimed else pl.Series([], dtype=pl.UInt32)
        remaining = remaining.filter(~pl.col("_row").is_in(done.implode()))
    if claimed:
        found = pl.concat(claimed).sort("_row")
        idx = idx.scatter(found["_row"], found["_idx"])
    return idx


_TOKEN_FALLBACK = frozenset({"template", "wtemplate", "ftemplate", "rng"})


def _by_spec(frame: pl.DataFrame, spec: str, make: Any, dtype: Any) -> pl.Series:
    """Per row: the fixed answer in column ``spec``, or its scheme's answer, computed on the
    rows that use that scheme only."""
    values = frame[spec].cast(pl.String)
    if dtype == pl.Boolean:
        fixed_values = values.replace_strict({"true": True, "false": False}, default=None, return_dtype=pl.Boolean)
    else:
        fixed_values = pl.select(pl.when(pl.lit(values).str.starts_with("scheme:")).then(None).otherwise(pl.lit(values))).to_series()
    fixed = pl.DataFrame({"_row": frame["_row"], "v": fixed_values})
    schemes = [v for v in values.unique().drop_nulls().to_list() if str(v).startswith("scheme:")]
    parts = []
    for scheme in schemes:
        name = scheme.split(":", 1)[1]
        part = frame.filter(pl.col(spec) == scheme).select("_row", "name", make(pl.col("name"), name).cast(dtype).alias("s"))
        if name in _TOKEN_FALLBACK and dtype == pl.String:
            # names without C++ types: their type words, looked for on those rows only
            missing = part.filter(pl.col("s").is_null())
            if missing.height:
                words = missing.select("_row", _token(pl.col("name")).alias("t"))
                part = part.join(words, on="_row", how="left").with_columns(s=pl.coalesce("s", "t"))
        parts.append(part.select("_row", "s"))
    if not parts:
        return fixed["v"]
    got = fixed.join(pl.concat(parts), on="_row", how="left").sort("_row")
    return got.select(pl.coalesce("s", "v"))["s"]


def _classify_unique(names: pl.Series, vendor: str | None) -> pl.DataFrame:
    frame = pl.DataFrame({"name": names.cast(pl.String).fill_null("")}).unique(maintain_order=True)
    if frame.height == 0:
        return pl.DataFrame(schema=COLUMNS)
    frame = frame.with_row_index("_row")
    frame = frame.with_columns(_match_rules(frame, vendor))
    rules = R.RULES
    i = pl.col("_idx")
    frame = frame.with_columns(
        rule=_spec_column(i, [r.id for r in rules]).fill_null(UNMATCHED_RULE),
        family=_spec_column(i, [r.family for r in rules]).fill_null("other"),
        _prec=_spec_column(i, [r.precision for r in rules]),
        _tc=_spec_column(i, [_tc_spec(r.tensor_core) for r in rules]),
        _lib=_spec_column(i, [r.library for r in rules]).replace("hint", "scheme:hint"),
        _sub=_spec_column(i, [r.subfamily for r in rules]),
    )

    def library_hint(name: pl.Expr, _: str) -> pl.Expr:
        return _first(name, R.LIBRARY_HINTS).fill_null("unknown")

    def subfamily_scheme(name: pl.Expr, scheme: str) -> pl.Expr:
        return _first(name, R.COLLECTIVE_NAMES if scheme == "collective" else R.MEMCPY_DIRECTIONS)

    frame = frame.with_columns(
        precision=_by_spec(frame, "_prec", _precision_scheme, pl.String).fill_null("unknown"),
        tensor_core=_by_spec(frame, "_tc", _tensor_core_scheme, pl.Boolean),
        library=_by_spec(frame, "_lib", library_hint, pl.String).fill_null("unknown"),
        subfamily=_by_spec(frame, "_sub", subfamily_scheme, pl.String),
    )
    if vendor == "amd":
        frame = frame.with_columns(library=pl.when(pl.col("library") == "nccl").then(pl.lit("rccl")).otherwise(pl.col("library")))
    frame = frame.with_columns(
        collective=pl.when(pl.col("family") == "communication").then(pl.col("subfamily")),
        element_bytes=pl.coalesce(
            pl.col("name").str.extract(R.OPAQUE_BYTES, 1).cast(pl.Int64, strict=False),
            pl.col("precision").replace_strict(R.PRECISION_BYTES, default=None, return_dtype=pl.Int64),
        ),
        alignment=pl.when(pl.col("family").is_in(list(R.MATRIX_FAMILIES)))
        .then(pl.col("name").str.extract_all(R.ALIGNMENT).list.eval(pl.element().str.extract(r"([0-9]+)$", 1).cast(pl.Int64, strict=False)).list.min())
        .cast(pl.Int64),
    )
    return frame.select([pl.col(c).cast(t) for c, t in COLUMNS.items()])


def classify_names(names: pl.Series | Iterable[str | None], vendor: str | None = None) -> pl.DataFrame:
    """One row per distinct name (columns :data:`COLUMNS`), in order of first appearance.

    ``vendor`` (nvidia / amd / intel / mtia, e.g. from the device model) switches on the rules
    whose names only mean something on that vendor's devices (MTIA's ``merge``, ``remote``)
    and tells RCCL from NCCL (RCCL keeps NCCL's kernel names). A null name counts as "".
    """
    series = names if isinstance(names, pl.Series) else pl.Series("name", list(names), dtype=pl.String)
    v = _norm_vendor(vendor)
    unique = series.cast(pl.String).fill_null("").unique(maintain_order=True).to_list()
    # A name's class depends on the name and the vendor alone: each is classified once per
    # process (analyses and transformations ask for the same kernel names many times).
    missing = [n for n in unique if (v, n) not in _CLASSES]
    if missing:
        if len(_CLASSES) + len(missing) > MAX_CACHED_CLASSES:
            _CLASSES.clear()
        for row in _classify_unique(pl.Series("name", missing, dtype=pl.String), v).iter_rows():
            _CLASSES[(v, row[0])] = row
    return pl.DataFrame([_CLASSES[(v, n)] for n in unique], schema=COLUMNS, orient="row")


def with_classes(frame: pl.DataFrame, name_col: str = "name", vendor: str | None = None) -> pl.DataFrame:
    """``frame`` plus the class columns (``kc_``-free names: family, subfamily, collective,
    precision, tensor_core, library, rule), joined by its name column.

    Classifies the distinct names only. Where ``frame`` has a ``collective_name`` column
    (NCCL kernels' ``Collective name`` arg) it fills ``collective`` for kernels whose name
    does not tell (``ncclDevKernel_Generic``).
    """
    table = classify_names(frame[name_col].unique(), vendor).rename({"name": "_kname"})
    table = table.drop([c for c in table.columns if c != "_kname" and c in frame.columns])
    out = frame.with_columns(pl.col(name_col).cast(pl.String).fill_null("").alias("_kname")).join(
        table, on="_kname", how="left"
    )
    if "collective_name" in frame.columns and "collective" in out.columns:
        from_args = _first(pl.col("collective_name").cast(pl.String), R.ARG_COLLECTIVES)
        out = out.with_columns(
            collective=pl.when(pl.col("family") == "communication")
            .then(pl.coalesce(pl.col("collective"), from_args))
            .otherwise(pl.col("collective"))
        )
    return out.drop("_kname")


def collective_of(text: pl.Expr) -> pl.Expr:
    """The collective (spelled as :data:`~traceinsight.analysis.classify.rules.COLLECTIVES`)
    that a torch or NCCL collective name states (``all_reduce``, ``_allgather_base``,
    ``reduce_scatter_tensor_coalesced``, ``nccl:all_to_all``); null where none."""
    return _first(text.cast(pl.String), R.ARG_COLLECTIVES)


@lru_cache(maxsize=65536)
def _classify_cached(name: str, vendor: str | None) -> KernelClass:
    row = classify_names(pl.Series("name", [name], dtype=pl.String), vendor).row(0, named=True)
    return KernelClass(**row)


def _arg_value(args: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, (list, tuple)):
            value = next((v for v in value if isinstance(v, str) and v), None)
        if isinstance(value, str) and value:
            return value
    return None


def _match(text: str, table: Iterable[tuple[str, str]]) -> str | None:
    hit = pl.select(_first(pl.lit(text), table)).item()
    return hit if isinstance(hit, str) else None


def classify(name: str | None, args: Mapping[str, Any] | None = None, vendor: str | None = None) -> KernelClass:
    """The class of one kernel (for single look-ups; use :func:`classify_names` on columns).

    ``args`` (the kernel event's args, or its launching op's) only add what the name lacks:
    the collective of a ``Generic`` NCCL kernel from ``Collective name``, the precision of a
    kernel whose name states none from ``dtype`` / ``Input type``.
    """
    base = _classify_cached(name or "", _norm_vendor(vendor))
    if not args:
        return base
    collective = base.collective
    precision = base.precision
    if base.family == "communication" and collective is None:
        text = _arg_value(args, "Collective name", "collective_name")
        collective = _match(text, R.ARG_COLLECTIVES) if text else None
    if precision == "unknown" and base.family not in ("memcpy", "memset", "sync"):
        text = _arg_value(args, "dtype", "Input type", "input_type")
        found = _match(text, R.ARG_DTYPES) if text else None
        if found is not None:
            precision = found
    if collective == base.collective and precision == base.precision:
        return base
    sub = collective if base.family == "communication" and collective is not None else base.subfamily
    return KernelClass(
        name=base.name,
        family=base.family,
        precision=precision,
        tensor_core=base.tensor_core,
        library=base.library,
        rule=base.rule + "+args",
        subfamily=sub,
        collective=collective,
        element_bytes=base.element_bytes if precision == base.precision else R.PRECISION_BYTES.get(precision),
        alignment=base.alignment,
    )
