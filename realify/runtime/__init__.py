"""What the real programs run with: the planar value (:mod:`.complex_tensor`), dtypes, the
``realify::`` custom ops (:mod:`.ops`), and the boundary where complex values cross a real
program's edges (:mod:`.boundary`, :mod:`.aliasing`)."""
