"""Library functions behind the CLI and the viewer.

Each module computes one thing and returns dataclasses (``to_dict()`` is the JSON form, the
keys ``--json`` prints); ``cli/`` renders them as text or JSON and ``view/`` serves them to the
page, so every number has one implementation.  Functions take an open
:class:`~pysafetensors.tools.checkpoint.Checkpoint` (from :func:`open_checkpoint`: a file, URL,
index, directory or pipe), or a path they open and close themselves.  The read tools (summary,
tree, identity, diff, stats, values) also take a GGUF file as a ``GGUFCheckpoint``
(``open_checkpoint(path, gguf=True)``).

========================  ==========================================================  =================
module                    functions                                                   returns
========================  ==========================================================  =================
``checkpoint``            ``open_checkpoint(path, storage_options, gguf)``            ``Checkpoint``,
                                                                                      ``GGUFCheckpoint``
``summary``               ``summarize(ckpt, patterns, tree)``, ``tensor_rows(ckpt)``  ``Summary``
``tree``                  ``build_tree(rows or ckpt.tensors)``, ``prefix_groups(...)``  ``TreeNode``,
                                                                                      ``PrefixGroups``
``blocks``                ``find_blocks(groups, names, dtypes, shapes)``              ``RepeatedBlock``
``identity``              ``identify(ckpt, content, per_tensor, canonical)``,         ``Identity``
                          ``structural_id(metadata, specs)``, ``canonical_form(...)``
``diff``                  ``diff_files(a, b, values, rtol, atol, structure_only)``,   ``DiffResult``,
                          ``tensor_value_diff(a, b, name, rtol, atol)``               ``ValueDiff``
``pairing``               ``stream_pair(...)``, ``differing_spans(...)``, ``hold(data)``  (the reading
                                                                                      under ``diff``)
``stats``                 ``file_stats(ckpt, patterns)``, ``tensor_stats(ckpt, name)``  ``StatsResult``,
                                                                                      ``TensorStats``
``values``                ``histogram(ckpt, name, bins, value_range)``,               ``Histogram``,
                          ``heatmap(ckpt, name, max_cells, reduce)``,                 ``Heatmap``
                          ``difference_histogram(a, b, name, bins)``
``metadata``              ``read_metadata(ckpt, key)``, ``edit_metadata(path, ...)``  ``MetadataResult``
``shard``                 ``shard_checkpoint(path, outdir, max_shard_size, ...)``      ``ShardResult``
``merge``                 ``merge_checkpoint(path, output, ...)``                      ``MergeResult``
``convert``               ``convert_checkpoint(path, output, ...)``                    ``ConversionReport``,
                                                                                      ``GGUFConversionResult``
========================  ==========================================================  =================

Long computations take ``progress=``, a callable ``(total_bytes, label) -> context manager``
with ``update(n)`` (:data:`Progress`).
"""

from ._base import Bar, JsonResult, Progress, no_progress, to_jsonable

__all__ = ["Bar", "JsonResult", "Progress", "no_progress", "to_jsonable"]
