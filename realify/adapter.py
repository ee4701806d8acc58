"""Calling a program made by :func:`realify.export` with complex tensors.

:class:`ComplexCallAdapter` turns complex arguments into the program's ``(..., 2)`` pairs and
its results back, checking what it is given first.
"""

from __future__ import annotations

import os
from typing import IO, Any

import torch
from torch.export import ExportedProgram
from torch.export._tree_utils import reorder_kwargs
from torch.utils._pytree import (
    SequenceKey,
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_unflatten,
    treespec_loads,
)

from .errors import RealifyError
from .runtime.aliasing import one_tensor, sharing_at_export
from .runtime.boundary import Boundary, RealCall, is_complex
from .saved_programs import (
    DESCRIPTION_KEY,
    archive_holds_aoti,
    carried_signature,
    check_fits,
    is_aoti_model,
    read_description,
)


class ComplexCallAdapter(torch.nn.Module):
    """Calls a program made by :func:`export` with the original complex arguments.

    Complex input tensors are passed as ``torch.view_as_real`` (a view when the tensor is
    contiguous, otherwise one copy); real ``(..., 2)`` outputs that were complex come back as
    ``torch.view_as_complex`` views, in the program's original dtype. Inputs the program
    mutates are written back. The program runs with autocast off (see Notes).

    Which inputs and outputs are complex (the :class:`~realify.Boundary`) travels inside the
    program: :func:`export` records it as versioned JSON in
    ``ep.graph_module.meta["custom"]["realify.boundary"]``, which ``torch.export.save`` writes
    and ``torch.export.load`` reads back, and :func:`aoti_compile_and_package` copies it into
    the AOTInductor package's metadata (same key). So the adapter takes the program
    :func:`export` returned, the same program saved and loaded again (in any process), or its
    AOTInductor package loaded with ``torch._inductor.aoti_load_package``; :meth:`load` opens
    either kind of ``.pt2`` file.

    Parameters
    ----------
    program : torch.export.ExportedProgram or AOTICompiledModel
        A program made by :func:`export` (as it returned it, or loaded with
        ``torch.export.load``), or the model ``torch._inductor.aoti_load_package`` loads from a
        package made by :func:`aoti_compile_and_package`.
    signature : Boundary, optional
        The boundary to call the program by, instead of the one it carries: the ``signature`` of
        an adapter of the original program (``ComplexCallAdapter(ep).signature``), for a copy that
        lost its description (a package compiled with ``torch._inductor.aoti_compile_and_package``
        itself).

    Attributes
    ----------
    signature : Boundary
        Per leaf of the flattened ``(args, kwargs)`` and of the flattened result, the complex
        dtype it has in the complex program (None where real), the inputs written in place,
        eager's output layouts.
    program : callable
        The real program: ``ep.module()``, or the AOTInductor model.

    Raises
    ------
    RealifyError
        The program carries no description (a plain ``torch.export.export`` program, a program
        saved by a realify release that did not record it, a package compiled with
        ``torch._inductor.aoti_compile_and_package`` itself); its description has a version
        this realify does not read, or is malformed; or it does not fit the program's inputs
        and outputs.
    TypeError
        ``program`` is neither an ExportedProgram nor a loaded AOTInductor model.

    See Also
    --------
    export : make the program.
    aoti_compile_and_package : package the program for AOTInductor, keeping its description.

    Notes
    -----
    The program runs with autocast off: under autocast its real GEMMs, which stand for complex
    ones, would be cast to half precision, where eager leaves complex ops alone.

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
    >>> adapter = realify.ComplexCallAdapter(ep)
    >>> adapter(z)                                   # complex in, complex out
    tensor([ 6.+2.j, 13.-1.j])
    >>> adapter.signature.inputs, adapter.signature.outputs
    ((torch.complex64,), (torch.complex64,))

    The description travels with the saved program, so a loaded copy takes complex tensors too:

    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "f.pt2")
    ...     torch.export.save(ep, path)
    ...     loaded = realify.ComplexCallAdapter(torch.export.load(path))
    >>> loaded(z)
    tensor([ 6.+2.j, 13.-1.j])

    A program ``torch.export.export`` made itself does not say which of its values are pairs:

    >>> plain = torch.export.export(torch.nn.Identity(), (torch.view_as_real(z),))
    >>> realify.ComplexCallAdapter(plain)
    Traceback (most recent call last):
        ...
    realify.errors.RealifyError: this ExportedProgram carries no realify description ...
    """

    def __init__(self, program: ExportedProgram | Any, signature: Boundary | None = None):
        super().__init__()
        if isinstance(program, ExportedProgram):
            in_spec, out_spec = program.call_spec.in_spec, program.call_spec.out_spec
            if signature is None:
                signature = carried_signature(program, out_spec)
            self.program = program.module()
            self._traced_sharing = sharing_at_export(program)
        elif is_aoti_model(program):
            in_spec, out_spec = (treespec_loads(spec) for spec in program.loader.get_call_spec())
            if signature is None:
                text = program.get_metadata().get(DESCRIPTION_KEY)
                if text is None:
                    raise RealifyError(
                        f"this AOTInductor model carries no realify description (metadata {DESCRIPTION_KEY!r}): "
                        f"its package was not made by realify.aoti_compile_and_package, so which of its inputs "
                        f"and outputs are complex (..., 2) pairs is unknown. Package the program made by "
                        f"realify.export with realify.aoti_compile_and_package(ep, package_path=...) (same "
                        f"arguments as torch._inductor.aoti_compile_and_package), or pass "
                        f"signature=realify.ComplexCallAdapter(ep).signature of the original program")
                signature = read_description(text, out_spec, "this AOTInductor package")
            self.program = program
            self._traced_sharing = []  # an AOTInductor package does not say
        else:
            raise TypeError(
                f"ComplexCallAdapter takes a torch.export.ExportedProgram made by realify.export, or a model "
                f"loaded by torch._inductor.aoti_load_package; got {type(program).__name__}")
        check_fits(signature, in_spec, out_spec)
        self.signature = signature
        self._in_spec = in_spec
        self._call = RealCall(self._real_program, self.signature, autocast_off=True,  # see the class docstring
                              on_shared_write=self._refuse_shared_write,
                              traced_sharing=[frozenset(group) for group in self._traced_sharing])

    @classmethod
    def load(cls, f: str | os.PathLike | IO[bytes], **load_options: Any) -> ComplexCallAdapter:
        """Open the program saved in ``f``, a ``.pt2`` file of either kind, as an adapter.

        Parameters
        ----------
        f : str, os.PathLike or binary file object
            A file written by ``torch.export.save`` of a program made by :func:`export`, or an
            AOTInductor package written by :func:`aoti_compile_and_package`. An archive holding
            both is loaded as the AOTInductor package.
        **load_options
            Passed to the loader: ``torch.export.load`` (``expected_opset_version``, ...) or
            ``torch._inductor.aoti_load_package`` (``run_single_threaded``, ``device_index``).

        Returns
        -------
        ComplexCallAdapter
            Takes and returns complex tensors, as the original program did.

        Raises
        ------
        RealifyError
            ``f`` is not a ``.pt2`` archive, holds neither kind of program, or holds a program
            without a realify description it can read (see the class).

        Examples
        --------
        >>> import os
        >>> import tempfile
        >>> import torch
        >>> import realify
        >>> def f(z):
        ...     return z * z.conj() + z
        >>> z = torch.tensor([1 + 2j, 3 - 1j])
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "f.pt2")
        ...     torch.export.save(realify.export(f, (z,)), path)
        ...     adapter = realify.ComplexCallAdapter.load(path)
        >>> adapter(z)
        tensor([ 6.+2.j, 13.-1.j])
        """
        if archive_holds_aoti(f):
            return cls(torch._inductor.aoti_load_package(f, **load_options))
        return cls(torch.export.load(f, **load_options))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Call the program with the complex arguments the original program took.

        Parameters
        ----------
        *args : Any
            The positional arguments, as the original program took them: complex tensors of
            the dtypes it was exported for where it took complex ones.
        **kwargs : Any
            The keyword arguments, likewise.

        Returns
        -------
        Any
            The program's result in its original structure, each output that was complex a
            complex tensor (a ``torch.view_as_complex`` view of the program's pairs where their
            strides allow one). Inputs the program writes in place are written.

        Raises
        ------
        RealifyError
            The arguments do not fit the program: another number of flattened inputs, a real
            tensor or another value where the program takes a complex tensor, a complex tensor
            where it takes a real value, a complex tensor of another dtype than it was exported
            for; or an input the program writes in place shares memory with another input (the
            exported program reads every input before it writes any, where eager's later reads
            see the write).

        Examples
        --------
        >>> import torch
        >>> import realify
        >>> def scale(x, factor):
        ...     x.mul_(factor)                         # written in place
        ...     return x + 1
        >>> x = torch.tensor([1 + 1j, 2 + 0j])
        >>> adapter = realify.ComplexCallAdapter(realify.export(scale, (x.clone(), torch.tensor(2.0))))
        >>> adapter(x, torch.tensor(2.0))
        tensor([3.+2.j, 5.+0.j])
        >>> x                                          # as eager writes it
        tensor([2.+2.j, 4.+0.j])
        >>> adapter(x.to(torch.complex128), torch.tensor(2.0))
        Traceback (most recent call last):
            ...
        realify.errors.RealifyError: args[0] is a torch.complex128 tensor, but the program was exported for ...
        """
        kwargs = reorder_kwargs(kwargs, self._in_spec)
        _check_complex_call(self.signature, args, kwargs)
        flat = tree_leaves((args, kwargs))
        for group in self._traced_sharing:
            _check_one_tensor_as_traced(flat, group, args, kwargs)
        return self._call(*flat)

    def _real_program(self, *flat: Any) -> list[Any]:
        """Run the exported program on flat real inputs.

        Return its flat outputs, then the inputs it writes in place (it writes the real tensors
        it is given, as does its AOTInductor model; RealCall copies them into the caller's
        where they are not views of them).
        """
        args, kwargs = tree_unflatten(list(flat), self._in_spec)
        out = tree_flatten(self.program(*args, **kwargs))[0]
        return [*out, *(flat[i] for i in self.signature.mutated_inputs)]

    def _refuse_shared_write(self, flat: tuple, written: int, other: int) -> Any:
        """Raise where a tensor the program writes in place shares memory with another input.

        The exported graph reads every input before it writes any, where eager's later reads of
        the other would see the write, and it has no eager program to run instead.
        """
        args, kwargs = tree_unflatten(list(flat), self._in_spec)
        written_name, other_name = (ArgumentName(args, kwargs, i) for i in (written, other))
        raise RealifyError(
            f"{other_name} shares memory with {written_name}, which the exported program writes in place: "
            f"the program reads every input before it writes any, so it would compute with the old values "
            f"of {other_name} where eager reads the new ones. Pass tensors that do not share memory (for "
            f"example, {other_name}.clone()), or call the original program (or realify.compile it) with "
            f"such inputs.")


def _check_one_tensor_as_traced(flat: list, group: list[int], args: tuple, kwargs: dict) -> None:
    """Raise unless the inputs at ``group`` are one tensor again (the same memory and layout)."""
    first, *others = group
    base = flat[first]
    for position in others:
        x = flat[position]
        if isinstance(x, torch.Tensor) and (x.numel() == 0 or (isinstance(base, torch.Tensor) and one_tensor(base, x))):
            continue
        a, b = ArgumentName(args, kwargs, first), ArgumentName(args, kwargs, position)
        raise RealifyError(
            f"{a} and {b} were one tensor when the program was exported (passed twice), and torch.export's "
            f"trace reads both through one of them: with {b} a tensor of its own the program would read "
            f"one in place of the other. Call it with one tensor there again, or export it with tensors "
            f"of their own (for example, {b}.clone()).")


class ArgumentName:
    """Flat input leaf ``i`` as the caller wrote it (``args[0]``, ``kwargs['x']``, ``args[1][0]``).

    It is worked out only when an error message formats it: the checks run on every call.
    """

    def __init__(self, args: tuple, kwargs: dict, i: int):
        self.args, self.kwargs, self.i = args, kwargs, i

    def __str__(self) -> str:
        paths, _ = tree_flatten_with_path((tuple(self.args), dict(self.kwargs)))
        path = paths[self.i][0]
        top = path[0]
        return ("args" if isinstance(top, SequenceKey) and top.idx == 0 else "kwargs") + keystr(path[1:])

    __format__ = lambda self, spec: format(str(self), spec)


def _check_complex_call(sig: Boundary, args: tuple, kwargs: dict) -> None:
    """Check the arguments of :class:`ComplexCallAdapter`.

    Complex tensors where the program had complex inputs, of the dtype it was exported for,
    and no complex tensor where it had a real one. Otherwise the real program would fail deep
    inside with a message about its real ops (``expected m1 and m2 to have the same dtype``),
    or compute in another precision.
    """
    flat = tree_leaves((args, kwargs))
    if len(flat) != len(sig.inputs):
        raise RealifyError(f"the exported program takes {len(sig.inputs)} flattened inputs, got {len(flat)}")
    for i, (x, dtype) in enumerate(zip(flat, sig.inputs)):
        name = ArgumentName(args, kwargs, i)
        if dtype is None:
            if is_complex(x):
                raise RealifyError(
                    f"{name} is a {x.dtype} tensor, but the program was exported with a real value there: "
                    f"pass a real tensor, as in the example inputs given to realify.export")
            continue
        if not isinstance(x, torch.Tensor):
            raise RealifyError(f"{name} is a {type(x).__name__}, but the program takes a {dtype} tensor there")
        if not x.dtype.is_complex:
            raise RealifyError(
                f"{name} is a real {x.dtype} tensor, but the program takes a {dtype} tensor there: pass "
                f"{name}.to({dtype}), or, for (..., 2) pairs, torch.view_as_complex({name}) (or call ep.module() "
                f"with the pairs themselves)")
        if x.dtype != dtype:
            raise RealifyError(
                f"{name} is a {x.dtype} tensor, but the program was exported for {dtype}: pass "
                f"{name}.to({dtype}), or export the program again with {x.dtype} example inputs")
