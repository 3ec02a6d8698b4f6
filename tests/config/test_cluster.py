"""Cluster specs from the short form and from YAML: good specs expand right, bad ones say where."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from suanli.config.cluster import load_cluster, parse_size, parse_yaml
from suanli.core.model import KNOWN_GPU_MODELS, ClusterSpec, SpecError

GIB = 1024
H100 = KNOWN_GPU_MODELS["H100"]


def racks(c: ClusterSpec) -> list[str]:
    return [n.rack for n in c.nodes]


def domains(c: ClusterSpec) -> list[str]:
    return [n.nvlink_domain for n in c.nodes]


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        pytest.param("512G", 512 * GIB, id="gib"),
        pytest.param("2T", 2 * 1024 * GIB, id="tib"),
        pytest.param("1.5TiB", 1536 * GIB, id="fraction-tib-spelling"),
        pytest.param("80GB", 80 * GIB, id="gb-is-binary"),
        pytest.param("300m", 300, id="lowercase-mib"),
        pytest.param("2048K", 2, id="kib"),
    ],
)
def test_parse_size(text: str, mib: int) -> None:
    assert parse_size(text) == mib


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("512", id="no-unit"),
        pytest.param("12X", id="bad-unit"),
        pytest.param("-1G", id="negative"),
        pytest.param("1K", id="below-one-mib"),
        pytest.param("", id="empty"),
    ],
)
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


# --------------------------------------------------------------------------------------------
# Short form
# --------------------------------------------------------------------------------------------


def test_default_cluster_expands_with_documented_defaults() -> None:
    c = load_cluster("64x8xH100")
    assert c.name == "64x8xH100"
    assert len(c.nodes) == 64 and c.total_gpus == 512
    first = c.nodes[0]
    assert first.name == "H100-0" and first.gpu_model == H100 and first.gpus == 8
    assert first.cpu_milli == 8 * 12 * 1000  # 12 cores per GPU
    assert first.memory_mib == 8 * 128 * GIB  # 128 GiB per GPU
    assert racks(c) == ["rack-0"] * 32 + ["rack-1"] * 32  # racks of 32 nodes
    assert set(domains(c)) == {""}  # each node its own NVLink domain
    assert c.nodes[-1].name == "H100-63"


@pytest.mark.parametrize(
    ("spec", "nodes", "gpus", "check"),
    [
        pytest.param(
            "32x8xH100+16x4xA100",
            48,
            320,
            lambda c: (
                c.nodes[32].name == "A100-0"
                and c.nodes[32].rack == "rack-1"  # each group starts a new rack
                and c.nodes[32].cpu_milli == 48_000
                and c.nodes[32].memory_mib == 512 * GIB
            ),
            id="two-groups",
        ),
        pytest.param(
            "18x4xGB200[nvlink=72,rack=18,cpu=144,mem=2T]",
            18,
            72,
            lambda c: (
                set(domains(c)) == {"nvl-0"}
                and set(racks(c)) == {"rack-0"}
                and c.nodes[0].cpu_milli == 144_000
                and c.nodes[0].memory_mib == 2 * 1024 * GIB
            ),
            id="nvl72-rack",
        ),
        pytest.param(
            "36x4xGB200[nvlink=72]",
            36,
            144,
            lambda c: (
                domains(c) == ["nvl-0"] * 18 + ["nvl-1"] * 18
                and racks(c) == ["rack-0"] * 18 + ["rack-1"] * 18
            ),  # default: one domain per rack
            id="nvlink-default-rack-is-domain",
        ),
        pytest.param(
            "16x8xH100[nvlink=16,rack=4]",
            16,
            128,
            lambda c: (
                domains(c)[:4] == ["nvl-0", "nvl-0", "nvl-1", "nvl-1"]
                and racks(c)[3:5] == ["rack-0", "rack-1"]
            ),
            id="two-domains-per-rack",
        ),
        pytest.param(
            "8x8xMYGPU[gpumem=40G,speed=1.2]",
            8,
            64,
            lambda c: (
                c.nodes[0].gpu_model.memory_mib == 40 * GIB
                and c.nodes[0].gpu_model.speed == 1.2
                and c.nodes[0].name == "MYGPU-0"
            ),
            id="custom-model",
        ),
        pytest.param(
            "2x8xH100[gpumem=94G]",
            2,
            16,
            lambda c: (
                c.nodes[0].gpu_model.memory_mib == 94 * GIB
                and c.nodes[0].gpu_model.speed == H100.speed
            ),
            id="known-model-override",
        ),
        pytest.param(
            "16x0",
            16,
            0,
            lambda c: (
                c.nodes[0].name == "cpu-0"
                and c.nodes[0].gpu_model is None
                and c.nodes[0].cpu_milli == 8_000  # minimum 8 cores
                and c.nodes[0].memory_mib == 64 * GIB
            ),  # minimum 64 GiB
            id="cpu-only",
        ),
        pytest.param(
            "4x8xH100+2x0",
            6,
            32,
            lambda c: [n.name for n in c.nodes][-2:] == ["cpu-0", "cpu-1"],
            id="gpu-and-cpu-groups",
        ),
        pytest.param(
            "2x8xh100 + 1x8xH100",
            3,
            24,
            lambda c: [n.name for n in c.nodes] == ["H100-0", "H100-1", "H100-2"],
            id="case-insensitive-model-spaces-names-continue",
        ),
        pytest.param(
            "1x1xT4[cpu=0.5,mem=512M]",
            1,
            1,
            lambda c: c.nodes[0].cpu_milli == 500 and c.nodes[0].memory_mib == 512,
            id="fractional-cpu",
        ),
    ],
)
def test_short_form(spec: str, nodes: int, gpus: int, check) -> None:  # type: ignore[no-untyped-def]
    c = load_cluster(spec)
    assert (len(c.nodes), c.total_gpus) == (nodes, gpus)
    assert check(c)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("", "cluster spec is empty", id="empty"),
        pytest.param("abc", "cluster spec 'abc': expected NODESxGPUS", id="garbage"),
        pytest.param("0x8xH100", "node count: must be >= 1 (got 0)", id="zero-nodes"),
        pytest.param("-2x8xH100", "node count: must be >= 1 (got -2)", id="negative-nodes"),
        pytest.param("4x-1xH100", "GPUs per node: must be >= 0 (got -1)", id="negative-gpus"),
        pytest.param("axbxH100", "node count: 'a' is not a whole number", id="not-a-number"),
        pytest.param("4x8", "model: required for nodes with GPUs", id="no-model"),
        pytest.param(
            "4x8xFOO",
            "unknown GPU model 'FOO' (known: K80, P100",
            id="unknown-model-lists-known",
        ),
        pytest.param(
            "4x8xH100[nvlink=12]",
            "nvlink: GPUs per NVLink domain must be a multiple of the 8 GPUs per node (got 12)",
            id="nvlink-not-multiple",
        ),
        pytest.param(
            "20x4xGB200[nvlink=72]",
            "20 nodes is not a whole number of domains",
            id="partial-nvlink-domain",
        ),
        pytest.param(
            "18x4xGB200[nvlink=72,rack=10]",
            "rack: racks of 10 nodes and NVLink domains of 18 nodes do not line up",
            id="racks-and-domains-misaligned",
        ),
        pytest.param(
            "16x0[nvlink=8]", "nvlink: given for nodes without GPUs", id="nvlink-cpu-only"
        ),
        pytest.param("4x8xH100[rack=0]", "rack: must be >= 1 (got 0)", id="zero-rack"),
        pytest.param("4x8xH100[cpu=-4]", "cpu: must be > 0 (got -4)", id="negative-cpu"),
        pytest.param("4x8xH100[mem=512]", "mem: '512' is not a size with a unit", id="mem-no-unit"),
        pytest.param("4x8xH100[speed=0]", "speed: must be > 0 (got 0)", id="zero-speed"),
        pytest.param(
            "4x8xH100[rak=2]", "unknown option 'rak' (did you mean 'rack'?)", id="unknown-option"
        ),
        pytest.param(
            "4x8xH100[nvlink]", "option 'nvlink': expected key=value", id="option-no-value"
        ),
        pytest.param("4x8xH100[cpu=1,cpu=2]", "cpu: given twice", id="option-twice"),
        pytest.param("4x8xH100+", "group 2 (empty): expected NODESxGPUS", id="empty-group"),
        pytest.param(
            "4x8xH100+2x8xH100[gpumem=94G]",
            "GPU model 'H100' defined twice",
            id="one-name-two-models",
        ),
        pytest.param("200000x8xH100", "more than 100000 nodes", id="too-many-nodes"),
        pytest.param("missing.yaml", "cluster file 'missing.yaml' not found", id="missing-file"),
    ],
)
def test_short_form_errors(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        load_cluster(spec)
    text = str(err.value)
    assert message in text
    assert "\n" not in text


# --------------------------------------------------------------------------------------------
# YAML
# --------------------------------------------------------------------------------------------

GOOD_YAML = dedent(
    """\
    name: lab
    models:
      - name: MYGPU
        memory: 40G
        speed: 1.2
    groups:
      - count: 4
        gpus: 8
        model: H100
        labels: {zone: a, ib: true}
      - count: 18
        gpus: 4
        model: GB200
        nvlink_gpus: 72
        cpu: 144
        memory: 2T
      - count: 2
        gpus: 8
        model: MYGPU
        prefix: my
    nodes:
      - name: big-0
        gpus: 8
        model: h200
      - name: box
        gpus: 0
        rack: rack-x
        healthy: false
    """
)


def write(tmp_path: Path, text: str, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_file(tmp_path: Path) -> None:
    c = load_cluster(str(write(tmp_path, GOOD_YAML)))
    by_name = {n.name: n for n in c.nodes}
    assert c.name == "lab"
    assert len(c.nodes) == 4 + 18 + 2 + 2
    assert c.total_gpus == 32 + 72 + 16 + 8
    assert by_name["H100-0"].labels == (("ib", "true"), ("zone", "a"))
    assert by_name["GB200-0"].nvlink_domain == "nvl-0" and by_name["GB200-17"].rack == "rack-1"
    assert by_name["GB200-0"].memory_mib == 2 * 1024 * GIB
    assert by_name["my-1"].gpu_model.memory_mib == 40 * GIB and by_name["my-1"].rack == "rack-2"
    assert by_name["big-0"].gpu_model == KNOWN_GPU_MODELS["H200"]
    assert by_name["big-0"].rack == "rack-3"  # rack-less explicit nodes share the next rack
    assert by_name["box"].rack == "rack-x" and not by_name["box"].healthy


def test_yaml_name_defaults_to_file_stem_and_path_objects_work(tmp_path: Path) -> None:
    path = write(tmp_path, "groups: [{count: 2, gpus: 8, model: A100}]\n", "mini.yml")
    c = load_cluster(path)
    assert c.name == "mini" and c.total_gpus == 16


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "groups:\n  - {count: 1, gpus: 8, model: H100}\n  - {count: 2, gpus: -1}\n",
            "groups[1].gpus: must be >= 0 (got -1)",
            id="negative-gpus",
        ),
        pytest.param(
            "groups: [{count: 0, gpus: 8, model: H100}]",
            "groups[0].count: must be >= 1 (got 0)",
            id="zero-count",
        ),
        pytest.param(
            "groups: [{gpus: 8, model: H100}]",
            "groups[0].count: required key is missing",
            id="missing-key",
        ),
        pytest.param(
            "groups: [{count: two, gpus: 8, model: H100}]",
            "groups[0].count: must be a whole number (got 'two')",
            id="not-a-number",
        ),
        pytest.param(
            "groups: [{count: 1, gpus: 8, model: H100, rack: 3}]",
            "groups[0].rack: unknown key (did you mean 'rack_size'?)",
            id="unknown-key",
        ),
        pytest.param(
            "grups: []", "grups: unknown key (did you mean 'groups'?)", id="unknown-top-level-key"
        ),
        pytest.param(
            "groups: [{count: 2, gpus: 8, model: FOO}]",
            "groups[0].model: unknown GPU model 'FOO'",
            id="unknown-model",
        ),
        pytest.param(
            "groups: [{count: 2, gpus: 8, model: H100, memory: 2048}]",
            "groups[0].memory: must be a size with a unit",
            id="memory-without-unit",
        ),
        pytest.param(
            "groups: [{count: 2, gpus: 8, model: H100, nvlink_gpus: 12}]",
            "groups[0].nvlink_gpus: GPUs per NVLink domain must be a multiple",
            id="nvlink-not-multiple",
        ),
        pytest.param(
            "groups: [{count: 1, gpus: 8, model: H100}]\nnodes: [{name: H100-0, gpus: 1, model: H100}]",
            "nodes[0].name: duplicate node name 'H100-0' (also in groups[0])",
            id="duplicate-node-name",
        ),
        pytest.param(
            "nodes: [{name: a, gpus: 2}]",
            "nodes[0].model: required for nodes with GPUs",
            id="node-no-model",
        ),
        pytest.param(
            "models: [{name: X, memory: 1G}, {name: X, memory: 2G}]\ngroups: [{count: 1, gpus: 1, model: X}]",
            "models[1].name: model 'X' defined twice",
            id="model-twice",
        ),
        pytest.param("name: x\n", "no nodes (give groups and/or nodes)", id="no-nodes"),
        pytest.param("", "empty file", id="empty-file"),
        pytest.param("- a\n- b\n", "expected a mapping", id="top-level-list"),
        pytest.param(
            "groups:\n  - count: 1\n   gpus: 8\n", "invalid YAML at line 3, column 4", id="bad-yaml"
        ),
    ],
)
def test_yaml_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as err:
        load_cluster(str(path))
    msg = str(err.value)
    assert msg.startswith(f"cluster file {str(path)!r}: ")
    assert message in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda p: p / "nope.yaml", "not found", id="missing"),
        pytest.param(lambda p: p, "is not a file", id="directory"),
    ],
)
def test_yaml_path_errors(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match=message):
        load_cluster(make(tmp_path))


def test_parse_yaml_text_names_its_source() -> None:
    with pytest.raises(SpecError, match=r"^cluster file 'inline': groups: must be a list"):
        parse_yaml("groups: {count: 1}", source="inline")
