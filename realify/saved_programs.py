"""The description of a program made by :func:`realify.export` that travels inside it.

It says which inputs and outputs are complex, as versioned JSON that
``torch.export.save``/``load`` and AOTInductor packages keep, so a saved program stays callable
with complex tensors.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from typing import IO, Any, cast

import torch
from torch.export import ExportedProgram

from .errors import RealifyError
from .runtime.aliasing import OutputView, sharing_at_export
from .runtime.boundary import SIGNATURE_KEY, Boundary

# Where the Boundary of a program made by export travels, as JSON text: under this key in
# ``ep.graph_module.meta["custom"]`` (torch.export.save writes a graph's ``custom`` metadata
# as JSON, and torch.export.load, ``run_decompositions`` and ``ep.module()`` keep it), and in
# an AOTInductor package's metadata (:func:`aoti_compile_and_package`).
DESCRIPTION_KEY = "realify.boundary"
# The format of that text: raise it whenever what one release writes another would misread
# (a field added to Boundary, a field's meaning changed); readers refuse other versions.
DESCRIPTION_FORMAT = "realify.boundary"
DESCRIPTION_VERSION = 1


def describe(signature: Boundary) -> str:
    """Write ``signature`` as the versioned JSON text that travels with an exported program.

    Every field of :class:`~realify.Boundary` is written but ``out_spec``, which the program's
    own call spec holds (a loaded program and an AOTInductor model have it).
    """
    from . import __version__

    def dtype(d: torch.dtype | None) -> str | None:
        return None if d is None else str(d).removeprefix("torch.")

    def view(v: OutputView | None) -> dict[str, Any] | None:
        if v is None:
            return None
        fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
        return {**fields, "dtype": dtype(v.dtype), "size": list(v.size), "stride": list(v.stride)}

    s = signature
    description = {
        "format": DESCRIPTION_FORMAT,
        "version": DESCRIPTION_VERSION,
        "written_by": f"realify {__version__}, torch {torch.__version__}",
        "inputs": [dtype(d) for d in s.inputs],
        "outputs": [dtype(d) for d in s.outputs],
        "mutated_inputs": list(s.mutated_inputs),
        "input_layout": s.input_layout if isinstance(s.input_layout, str) else list(s.input_layout),
        "output_layout": s.output_layout,
        "output_views": [view(v) for v in s.output_views],
        "output_strides": [None if st is None else list(st) for st in s.output_strides],
        "eager_outputs": s.eager_outputs,
        "pair_dtypes": [[dtype(c), dtype(r)] for c, r in s.pair_dtypes.items()],
        "contiguous_pairs": s.contiguous_pairs,
        "written_regions": [None if r is None else [list(step) for step in r] for r in s.written_regions],
        "hidden_writes": sorted(s.hidden_writes),
    }
    return json.dumps(description, separators=(",", ":"))


def read_description(text: str, out_spec: Any = None, where: str = "this program") -> Boundary:
    """Read back the :class:`~realify.Boundary` that :func:`describe` wrote as ``text``.

    ``out_spec`` is the program's own. Raise :class:`~realify.RealifyError` for text of another
    format or version, naming both versions and what to do.
    """
    from . import __version__

    try:
        description = json.loads(text)
    except (TypeError, ValueError) as err:
        raise RealifyError(f"{where} carries a realify description that is not JSON ({err}): it was not "
                           f"written by realify.export; export the program again") from None
    if not isinstance(description, dict) or description.get("format") != DESCRIPTION_FORMAT:
        raise RealifyError(f"{where} carries a {DESCRIPTION_KEY!r} entry that is not a realify boundary "
                           f"description (no format {DESCRIPTION_FORMAT!r}): export the program again")
    version = description.get("version")
    if version != DESCRIPTION_VERSION:
        raise RealifyError(
            f"{where} carries a realify boundary description of version {version!r} (written by "
            f"{description.get('written_by', 'an unknown release')}), but realify {__version__} reads version "
            f"{DESCRIPTION_VERSION} only: load it with the realify release that saved it, or export and save the "
            f"complex program again with this one")

    def dtype(name: Any) -> torch.dtype | None:
        if name is None:
            return None
        d = getattr(torch, name) if isinstance(name, str) and hasattr(torch, name) else None
        if not isinstance(d, torch.dtype):
            raise ValueError(f"unknown dtype {name!r}")
        return d

    def known_dtype(name: Any) -> torch.dtype:
        found = dtype(name)
        if found is None:
            raise ValueError("a pair dtype is missing")
        return found

    def view(v: Any) -> OutputView | None:
        if v is None:
            return None
        return OutputView(**{**v, "dtype": dtype(v["dtype"]), "size": tuple(v["size"]), "stride": tuple(v["stride"])})

    d = description
    try:
        return Boundary(
            inputs=tuple(dtype(x) for x in d["inputs"]),
            outputs=tuple(dtype(x) for x in d["outputs"]),
            mutated_inputs=tuple(int(i) for i in d["mutated_inputs"]),
            out_spec=out_spec,
            input_layout=cast(Any, layout if isinstance(layout := d["input_layout"], str) else tuple(layout)),
            output_layout=d["output_layout"],
            output_views=tuple(view(v) for v in d["output_views"]),
            output_strides=tuple(None if st is None else tuple(st) for st in d["output_strides"]),
            eager_outputs=bool(d["eager_outputs"]),
            pair_dtypes={known_dtype(c): known_dtype(r) for c, r in d["pair_dtypes"]},
            contiguous_pairs=bool(d["contiguous_pairs"]),
            written_regions=tuple(None if r is None else tuple(tuple(step) for step in r)
                                  for r in d["written_regions"]),
            hidden_writes=frozenset(d["hidden_writes"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise RealifyError(f"{where} carries a malformed realify boundary description of version {version} "
                           f"({type(err).__name__}: {err}): export and save the program again") from None


def carried_signature(ep: ExportedProgram, out_spec: Any) -> Boundary:
    """Return the boundary an ExportedProgram carries.

    That is the Boundary :func:`export` left on its graph module in this process, else the
    description it saved with it.
    """
    meta = ep.graph_module.meta
    if isinstance(meta.get(SIGNATURE_KEY), Boundary):
        return meta[SIGNATURE_KEY]
    custom = meta.get("custom")
    text = custom.get(DESCRIPTION_KEY) if isinstance(custom, dict) else None
    if text is None:
        raise RealifyError(
            f"this ExportedProgram carries no realify description (graph_module.meta['custom'][{DESCRIPTION_KEY!r}]), "
            f"so which of its inputs and outputs are complex (..., 2) pairs is unknown: it needs an ExportedProgram "
            f"made by realify.export (a plain torch.export.export program has none, nor has one saved by a realify "
            f"release that did not record it yet). Export the complex program with realify.export(program, args), "
            f"whose description torch.export.save and torch.export.load keep, or pass "
            f"signature=realify.ComplexCallAdapter(ep).signature of the original program")
    return read_description(text, out_spec, "this ExportedProgram")


def check_fits(signature: Boundary, in_spec: Any, out_spec: Any) -> None:
    """Raise where the boundary does not describe this program's flat inputs and outputs."""
    if in_spec.num_leaves != len(signature.inputs) or out_spec.num_leaves != len(signature.outputs):
        raise RealifyError(
            f"the realify description does not fit this program: it describes {len(signature.inputs)} inputs and "
            f"{len(signature.outputs)} outputs, the program takes {in_spec.num_leaves} and returns "
            f"{out_spec.num_leaves}; pass the program the description was made for (or its own signature)")


def is_aoti_model(program: Any) -> bool:
    """Whether ``program`` is a model ``torch._inductor.aoti_load_package`` loaded."""
    loader = getattr(program, "loader", None)
    return callable(program) and hasattr(program, "get_metadata") and hasattr(loader, "get_call_spec")


def archive_holds_aoti(f: Any) -> bool:
    """Whether the ``.pt2`` archive ``f`` holds an AOTInductor model (files under ``data/aotinductor/``).

    Otherwise it is loaded as torch.export.save's file.
    """
    position = f.tell() if hasattr(f, "tell") else None
    try:
        with zipfile.ZipFile(f) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as err:
        raise RealifyError(f"{f!r} is not a .pt2 archive ({err}): pass a file written by torch.export.save "
                           f"or by realify.aoti_compile_and_package") from None
    finally:
        if position is not None:
            f.seek(position)
    if any("data/aotinductor/" in name for name in names):
        return True
    if not any("/models/" in name or name.startswith("models/") for name in names):
        raise RealifyError(f"{f!r} holds neither an exported program (torch.export.save) nor an AOTInductor model "
                           f"(realify.aoti_compile_and_package)")
    return False


def aoti_compile_and_package(ep: ExportedProgram, package_path: str | os.PathLike | IO[bytes] | None = None, *,
                             inductor_configs: dict[str, Any] | None = None) -> Any:
    """Compile a program made by :func:`export` into an AOTInductor package that keeps its description.

    This is ``torch._inductor.aoti_compile_and_package`` with the program's realify description
    added to the package's metadata, so that the loaded model can be called with complex
    tensors (:class:`ComplexCallAdapter`).

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        A program made by :func:`export` (or loaded with ``torch.export.load``), which must
        still have its example inputs.
    package_path : str, os.PathLike or binary file object, optional
        Where to write the package (a name ending in ``.pt2``); torch picks a temporary file
        when None.
    inductor_configs : dict, optional
        Inductor options, as for ``torch._inductor.aoti_compile_and_package``; its
        ``"aot_inductor.metadata"`` entries are kept.

    Returns
    -------
    str or file object
        The package's path (or ``package_path`` itself), as torch's function returns it.

    Raises
    ------
    RealifyError
        ``ep`` carries no realify description it can read (see :class:`ComplexCallAdapter`), or
        was exported with one tensor passed twice (its trace reads both through one of them,
        which the package could not check at its calls).

    Notes
    -----
    AOTInductor compiles the program's graph, not its metadata: a package that
    ``torch._inductor.aoti_compile_and_package`` made itself does not say which inputs and
    outputs are complex pairs. This one adds the description to ``aot_inductor.metadata``
    (key ``"realify.boundary"``, with any metadata of the caller's), where
    ``torch._inductor.aoti_load_package(path).get_metadata()`` reads it back.

    Examples
    --------
    >>> import os
    >>> import tempfile
    >>> import torch
    >>> import realify
    >>> def f(z):
    ...     return z * z.conj() + z
    >>> z = torch.tensor([1 + 2j, 3 - 1j])
    >>> ep = realify.export(f, (z,))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "f.pt2")
    ...     written = realify.aoti_compile_and_package(ep, package_path=path)  # a C++ build: about 30 s
    ...     model = torch._inductor.aoti_load_package(written)
    ...     same = realify.ComplexCallAdapter.load(path)       # the same model, opened by the adapter
    >>> "realify.boundary" in model.get_metadata()
    True
    >>> realify.ComplexCallAdapter(model)(z)
    tensor([ 6.+2.j, 13.-1.j])
    >>> same(z)
    tensor([ 6.+2.j, 13.-1.j])
    """
    import torch._inductor

    signature = carried_signature(ep, ep.call_spec.out_spec)  # raises without a description
    for first, other, *_ in sharing_at_export(ep):
        raise RealifyError(
            f"the program was exported with one tensor as user inputs {first} and {other} (passed twice), and its "
            f"trace reads both through one of them; an AOTInductor package does not record that, so its callers "
            f"could pass two tensors of which it reads one. Export with tensors of their own (for example, a "
            f".clone() of the second), then package")
    configs = dict(inductor_configs or {})
    metadata = {**torch._inductor.config.aot_inductor.metadata, **(configs.get("aot_inductor.metadata") or {})}
    metadata[DESCRIPTION_KEY] = describe(signature)
    configs["aot_inductor.metadata"] = metadata
    return torch._inductor.aoti_compile_and_package(ep, package_path=package_path, inductor_configs=configs)
