"""Tenancy files: good files load into exact specs, bad ones say what is wrong and at which key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from textwrap import dedent

import pytest

from suanli.config.tenancy import TenancyConfig, load_tenancy, parse_tenancy
from suanli.core.model import DEFAULT_PRIORITY_CLASSES, PriorityClass, SpecError
from suanli.core.tenancy import OverQuota, QueueSpec, QuotaBook

GIB = 1024
TIB = 1024 * GIB

EXAMPLE = dedent(
    """\
    priority_classes:
      online: {value: 1000, preemptible: false}
      spot: {value: -100, preemptible: true}
    queues:
      - name: vision
        org: ai-lab/vision
        cohort: ai-lab
        weight: 2
        nominal: {gpu: 64, "gpu:H100": 32, cpu: 512, memory: 4Ti}
        borrowing_limit: {gpu: 32}
        lending_limit: {gpu: 16}
      - name: nlp
        org: ai-lab/nlp
        cohort: ai-lab
        nominal: {gpu: 32, cpu: 256, memory: 2Ti}
    """
)


def one_queue(text: str) -> QueueSpec:
    """The only queue of a file whose ``queues`` list is ``text``."""
    queues = parse_tenancy(text).tenancy.queues
    assert len(queues) == 1
    return queues[0]


# --------------------------------------------------------------------------------------------
# Valid files
# --------------------------------------------------------------------------------------------


def test_example_file_loads_exactly() -> None:
    config = parse_tenancy(EXAMPLE)
    assert isinstance(config, TenancyConfig)
    assert config.tenancy.queues == (
        QueueSpec(
            name="vision",
            org="ai-lab/vision",
            cohort="ai-lab",
            nominal={"gpu": 64_000, "gpu:H100": 32_000, "cpu": 512_000, "memory": 4 * TIB},
            borrowing_limit={"gpu": 32_000},
            lending_limit={"gpu": 16_000},
            weight=2.0,
        ),
        QueueSpec(
            name="nlp",
            org="ai-lab/nlp",
            cohort="ai-lab",
            nominal={"gpu": 32_000, "cpu": 256_000, "memory": 2 * TIB},
        ),
    )
    assert config.priority_classes == {
        "online": PriorityClass("online", 1000, preemptible=False),
        "spot": PriorityClass("spot", -100, preemptible=True),
    }


def test_example_file_drives_a_quota_book() -> None:
    """vision reserves 48 of its 64 GPUs; the pool is its 16 plus nlp's 32."""
    book = QuotaBook(parse_tenancy(EXAMPLE).tenancy)
    assert book.resources == ["cpu", "gpu", "gpu:H100", "memory"]
    gpus = book.demand(0, 0, 1000, None)
    book.charge("nlp", 40 * gpus)  # 8 GPUs borrowed from vision's 16 lendable
    assert book.check("vision", 56 * gpus) is None  # 48 reserved + the 8 left in the pool
    assert book.check("vision", 57 * gpus) == OverQuota("vision", "gpu", 57_000, 56_000, "cohort")
    book.refund("nlp", 40 * gpus)
    assert book.check("vision", 96 * gpus) is None  # 64 + the borrowing limit of 32
    assert book.check("vision", 97 * gpus) == OverQuota(
        "vision", "gpu", 97_000, 96_000, "borrowing limit", "queue"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "queues: [{name: all}]",
            QueueSpec(name="all"),
            id="minimal-queue-defaults",
        ),
        pytest.param(
            "queues: [{name: q, nominal: {gpu: 0.5, cpu: 0.25, 'gpu:A100': 1.001}}]",
            QueueSpec(name="q", nominal={"gpu": 500, "cpu": 250, "gpu:A100": 1001}),
            id="fractions-to-milli",
        ),
        pytest.param(
            "queues: [{name: q, nominal: {gpu: 0, cpu: 0, memory: 0}}]",
            QueueSpec(name="q", nominal={"gpu": 0, "cpu": 0, "memory": 0}),
            id="zero-amounts",
        ),
        pytest.param(
            "queues: [{name: q, nominal: {'gpu:my model-x 80G': 2}}]",
            QueueSpec(name="q", nominal={"gpu:my model-x 80G": 2000}),
            id="any-gpu-model-name",
        ),
        pytest.param(
            "queues:\n  - name: q\n    nominal:\n      gpu:H100: 8\n",
            QueueSpec(name="q", nominal={"gpu:H100": 8000}),
            id="unquoted-gpu-model-key",
        ),
        pytest.param(
            "queues: [{name: q, org: /ai-lab/vision/}]",
            QueueSpec(name="q", org="ai-lab/vision"),
            id="org-slashes-stripped",
        ),
        pytest.param(
            "queues: [{name: q, org: /}]",
            QueueSpec(name="q", org=""),
            id="org-root",
        ),
        pytest.param(
            "queues: [{name: q, weight: 0.5, cohort: null}]",
            QueueSpec(name="q", weight=0.5),
            id="float-weight-null-cohort",
        ),
        pytest.param(
            "queues: [{name: q, borrowing_limit: {}, lending_limit: {}}]",
            QueueSpec(name="q"),
            id="empty-limits-without-cohort",
        ),
        pytest.param(
            "queues: [{name: q, cohort: c, nominal: {gpu: 8}, lending_limit: {gpu: 8},"
            " borrowing_limit: {cpu: 4, memory: 1Gi}}]",
            QueueSpec(
                name="q",
                cohort="c",
                nominal={"gpu": 8000},
                lending_limit={"gpu": 8000},
                borrowing_limit={"cpu": 4000, "memory": GIB},
            ),
            id="lend-all-borrow-unnamed-resource",
        ),
    ],
)
def test_valid_queues(text: str, expected: QueueSpec) -> None:
    assert one_queue(text) == expected


@pytest.mark.parametrize(
    ("memory", "mib"),
    [
        pytest.param("4Ti", 4 * TIB, id="Ti"),
        pytest.param("4TiB", 4 * TIB, id="TiB"),
        pytest.param("4T", 4 * TIB, id="T-is-binary"),
        pytest.param("4TB", 4 * TIB, id="TB-is-binary"),
        pytest.param("512Gi", 512 * GIB, id="Gi"),
        pytest.param("512g", 512 * GIB, id="lowercase"),
        pytest.param("1.5Ti", 1536 * GIB, id="fraction"),
        pytest.param("300Mi", 300, id="Mi"),
        pytest.param("2048Ki", 2, id="Ki"),
        pytest.param("'512 Gi'", 512 * GIB, id="space-before-unit"),
        pytest.param("0Gi", 0, id="zero-with-unit"),
        pytest.param("1024", 1024, id="bare-number-is-mib"),
        pytest.param("'1024'", 1024, id="bare-string-is-mib"),
        pytest.param("2048.0", 2048, id="whole-float-is-mib"),
    ],
)
def test_memory_sizes(memory: str, mib: int) -> None:
    assert one_queue(f"queues: [{{name: q, nominal: {{memory: {memory}}}}}]").nominal == {
        "memory": mib
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("queues: [{name: q}]", dict(DEFAULT_PRIORITY_CLASSES), id="absent-default"),
        pytest.param(
            "priority_classes: null\nqueues: [{name: q}]",
            dict(DEFAULT_PRIORITY_CLASSES),
            id="null-default",
        ),
        pytest.param(
            "priority_classes: {batch: {value: 5}}\nqueues: [{name: q}]",
            {"batch": PriorityClass("batch", 5, preemptible=False)},
            id="given-replace-defaults",
        ),
        pytest.param(
            "priority_classes: {spot: {value: -100, preemptible: true}, ops: {value: 0}}\n"
            "queues: [{name: q}]",
            {"spot": PriorityClass("spot", -100, True), "ops": PriorityClass("ops", 0, False)},
            id="negative-and-zero",
        ),
    ],
)
def test_priority_classes(text: str, expected: dict[str, PriorityClass]) -> None:
    assert parse_tenancy(text).priority_classes == expected


def test_default_priority_classes_are_a_copy() -> None:
    config = parse_tenancy("queues: [{name: q}]")
    config.priority_classes.pop("spot")
    assert "spot" in DEFAULT_PRIORITY_CLASSES
    assert "spot" in parse_tenancy("queues: [{name: q}]").priority_classes


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".YAML"])
@pytest.mark.parametrize("as_path", [True, False], ids=["path", "str"])
def test_load_from_file(tmp_path: Path, suffix: str, as_path: bool) -> None:
    path = tmp_path / f"tenancy{suffix}"
    path.write_text(EXAMPLE, encoding="utf-8")
    config = load_tenancy(path if as_path else str(path))
    assert config == parse_tenancy(EXAMPLE)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("queues: [{name: a, nominal: {gpu: -1}}]\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_tenancy(path)
    assert (
        str(err.value) == f"tenancy file {str(path)!r}: queues[0].nominal.gpu: must be >= 0, got -1"
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda p: p / "nope.yaml", "{path!r} not found", id="missing"),
        pytest.param(lambda p: p, "{path!r} is not a file", id="directory"),
        pytest.param(
            lambda p: _touch(p / "t.json"),
            "{path!r}: expected a .yaml or .yml file",
            id="wrong-suffix",
        ),
    ],
)
def test_path_errors(tmp_path: Path, make: Callable[[Path], Path], message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(SpecError) as err:
        load_tenancy(path)
    assert str(err.value) == "tenancy file " + message.format(path=str(path))


def _touch(path: Path) -> Path:
    path.write_text("queues: [{name: q}]\n", encoding="utf-8")
    return path


def test_parse_names_its_source() -> None:
    with pytest.raises(SpecError) as err:
        parse_tenancy("queues: {name: a}", source="inline")
    assert str(err.value) == "tenancy file 'inline': queues: must be a list"


# --------------------------------------------------------------------------------------------
# Errors: every one with its exact key path
# --------------------------------------------------------------------------------------------

Q = "queues: [{name: a}, "  # a valid queues[0]; the case's queue is queues[1]

ERRORS = [
    # the document
    pytest.param("", "empty file (expected queues)", id="empty"),
    pytest.param("- a", "expected a mapping with queues at the top level", id="not-a-mapping"),
    pytest.param(
        "queues: [\n",
        "invalid YAML at line 2, column 1: expected the node content, but found '<stream end>'",
        id="invalid-yaml",
    ),
    pytest.param("{}", "queues: required key is missing", id="no-queues"),
    pytest.param("queues: []", "queues: must not be empty", id="empty-queues"),
    pytest.param("queues: {name: a}", "queues: must be a list", id="queues-not-a-list"),
    pytest.param(
        "queue: [{name: a}]",
        "unknown key 'queue' (did you mean 'queues'?) (and 1 more error)",
        id="unknown-top-key-hint",
    ),
    pytest.param(
        "queues: [{name: a}]\nowner: me",
        "unknown key 'owner' (keys: priority_classes, queues, admission)",
        id="unknown-top-key-list",
    ),
    # queue keys
    pytest.param(
        "queues: [{name: a, nominl: {gpu: 1}}]",
        "queues[0]: unknown key 'nominl' (did you mean 'nominal'?)",
        id="unknown-queue-key",
    ),
    pytest.param(
        "queues: [{name: a, quota: 1}]",
        "queues[0]: unknown key 'quota' (keys: name, org, cohort, weight, nominal, "
        "borrowing_limit, lending_limit)",
        id="unknown-queue-key-list",
    ),
    pytest.param(Q + "{org: x}]", "queues[1].name: required key is missing", id="name-missing"),
    pytest.param(Q + "{name: ''}]", "queues[1].name: must not be empty, got ''", id="name-empty"),
    pytest.param(Q + "{name: 7}]", "queues[1].name: must be a string, got 7", id="name-number"),
    pytest.param(
        "queues: [{name: vision}, {name: vision}]",
        "queues[1].name: 'vision' is defined twice",
        id="name-twice",
    ),
    pytest.param(Q + "{name: b, org: 3}]", "queues[1].org: must be a string, got 3", id="org-type"),
    pytest.param(
        Q + "{name: b, org: 'ai-lab//vision'}]",
        "queues[1].org: 'ai-lab//vision' has an empty part (write e.g. ai-lab/vision)",
        id="org-empty-part",
    ),
    pytest.param(
        Q + "{name: b, cohort: ''}]",
        "queues[1].cohort: must not be empty, got ''",
        id="cohort-empty",
    ),
    pytest.param(
        Q + "{name: b, weight: 0}]", "queues[1].weight: must be > 0, got 0", id="weight-0"
    ),
    pytest.param(
        Q + "{name: b, weight: -1.5}]", "queues[1].weight: must be > 0, got -1.5", id="weight-neg"
    ),
    pytest.param(
        Q + "{name: b, weight: .inf}]",
        "queues[1].weight: must be a finite number, got inf",
        id="weight-inf",
    ),
    pytest.param(
        Q + "{name: b, weight: '2'}]",
        "queues[1].weight: must be a number, got '2'",
        id="weight-str",
    ),
    pytest.param(
        Q + "{name: b, weight: true}]",
        "queues[1].weight: must be a number, got True",
        id="weight-bool",
    ),
    # resource maps
    pytest.param(
        "queues: [{name: a, nominal: [gpu]}]",
        "queues[0].nominal: must be a mapping",
        id="nominal-not-a-mapping",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {gpus: 8}}]",
        "queues[0].nominal: unknown resource 'gpus' (did you mean 'gpu'?)",
        id="unknown-resource-hint",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {GPU: 8}}]",
        "queues[0].nominal: unknown resource 'GPU' (did you mean 'gpu'?)",
        id="resource-names-are-lowercase",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {disk: 8}}]",
        "queues[0].nominal: unknown resource 'disk' (resources: cpu, memory, gpu, gpu:<MODEL>)",
        id="unknown-resource",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {'gpu:': 8}}]",
        "queues[0].nominal: unknown resource 'gpu:' (the GPU model name is missing)",
        id="gpu-model-missing",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {1: 8}}]",
        "queues[0].nominal: unknown resource 1 (resources: cpu, memory, gpu, gpu:<MODEL>)",
        id="resource-not-a-string",
    ),
    pytest.param(
        "queues: [{name: a}, {name: b}, {name: c, nominal: {gpu: -1}}]",
        "queues[2].nominal.gpu: must be >= 0, got -1",
        id="gpu-negative",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {cpu: -0.5}}]",
        "queues[0].nominal.cpu: must be >= 0, got -0.5",
        id="cpu-negative",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {'gpu:H100': .nan}}]",
        "queues[0].nominal.gpu:H100: must be a finite number, got nan",
        id="gpu-model-nan",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {gpu: 0.0005}}]",
        "queues[0].nominal.gpu: must be a multiple of 0.001, got 0.0005",
        id="gpu-below-milli",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {cpu: '8'}}]",
        "queues[0].nominal.cpu: must be a number, got '8'",
        id="cpu-string",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {gpu: true}}]",
        "queues[0].nominal.gpu: must be a number, got True",
        id="gpu-bool",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {gpu: }}]",
        "queues[0].nominal.gpu: must be a number, got None",
        id="gpu-null",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {memory: -1Gi}}]",
        "queues[0].nominal.memory: must be >= 0, got '-1Gi'",
        id="memory-negative-size",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {memory: -1}}]",
        "queues[0].nominal.memory: must be >= 0, got -1",
        id="memory-negative-number",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {memory: 0.5}}]",
        "queues[0].nominal.memory: a bare number is MiB and must be whole "
        "(or give a unit, e.g. 512Gi), got 0.5",
        id="memory-fractional-mib",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {memory: 0.1Ki}}]",
        "queues[0].nominal.memory: must be 0 or at least 1 MiB, got '0.1Ki'",
        id="memory-below-one-mib",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {memory: 4Xi}}]",
        "queues[0].nominal.memory: must be a size such as 512Gi or 4Ti, or a whole number "
        "of MiB, got '4Xi'",
        id="memory-bad-unit",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {memory: [4Ti]}}]",
        "queues[0].nominal.memory: must be a size such as 512Gi or 4Ti, or a whole number "
        "of MiB, got ['4Ti']",
        id="memory-list",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {memory: .inf}}]",
        "queues[0].nominal.memory: must be a finite number, got inf",
        id="memory-inf",
    ),
    # limits
    pytest.param(
        "queues: [{name: a, nominal: {gpu: 8}, borrowing_limit: {gpu: 4}}]",
        "queues[0].borrowing_limit: needs a cohort (a queue without one can neither borrow "
        "nor lend)",
        id="borrowing-without-cohort",
    ),
    pytest.param(
        "queues: [{name: a, nominal: {gpu: 8}, lending_limit: {gpu: 4}}]",
        "queues[0].lending_limit: needs a cohort (a queue without one can neither borrow nor lend)",
        id="lending-without-cohort",
    ),
    pytest.param(
        "queues: [{name: a, cohort: c, borrowing_limit: {gpu: -4}}]",
        "queues[0].borrowing_limit.gpu: must be >= 0, got -4",
        id="borrowing-negative",
    ),
    pytest.param(
        "queues: [{name: a, cohort: c, borrowing_limit: {gpus: 4}}]",
        "queues[0].borrowing_limit: unknown resource 'gpus' (did you mean 'gpu'?)",
        id="borrowing-unknown-resource",
    ),
    pytest.param(
        "queues: [{name: a, cohort: c, nominal: {gpu: 8}, lending_limit: {gpu: 8.5}}]",
        "queues[0].lending_limit.gpu: must be <= the nominal (8), got 8.5",
        id="lending-above-nominal",
    ),
    pytest.param(
        "queues: [{name: a, cohort: c, nominal: {gpu: 8}, lending_limit: {cpu: 1}}]",
        "queues[0].lending_limit.cpu: must be <= the nominal (0), got 1",
        id="lending-without-nominal",
    ),
    # priority classes
    pytest.param(
        "priority_classes: {}\nqueues: [{name: a}]",
        "priority_classes: must not be empty",
        id="classes-empty",
    ),
    pytest.param(
        "priority_classes: [online]\nqueues: [{name: a}]",
        "priority_classes: must be a mapping",
        id="classes-not-a-mapping",
    ),
    pytest.param(
        "priority_classes: {batch: {value: 1.5}}\nqueues: [{name: a}]",
        "priority_classes.batch.value: must be an integer, got 1.5",
        id="class-value-float",
    ),
    pytest.param(
        "priority_classes: {batch: {value: 100.0}}\nqueues: [{name: a}]",
        "priority_classes.batch.value: must be an integer, got 100.0",
        id="class-value-whole-float",
    ),
    pytest.param(
        "priority_classes: {batch: {value: '100'}}\nqueues: [{name: a}]",
        "priority_classes.batch.value: must be an integer, got '100'",
        id="class-value-string",
    ),
    pytest.param(
        "priority_classes: {batch: {value: true}}\nqueues: [{name: a}]",
        "priority_classes.batch.value: must be an integer, got True",
        id="class-value-bool",
    ),
    pytest.param(
        "priority_classes: {batch: {preemptible: true}}\nqueues: [{name: a}]",
        "priority_classes.batch.value: required key is missing",
        id="class-value-missing",
    ),
    pytest.param(
        "priority_classes: {batch: {value: 1, preemptible: 'no'}}\nqueues: [{name: a}]",
        "priority_classes.batch.preemptible: must be true or false, got 'no'",
        id="class-preemptible-string",
    ),
    pytest.param(
        "priority_classes: {batch: {value: 1, preempt: true}}\nqueues: [{name: a}]",
        "priority_classes.batch: unknown key 'preempt' (did you mean 'preemptible'?)",
        id="class-unknown-key",
    ),
    pytest.param(
        "priority_classes: {batch: 5}\nqueues: [{name: a}]",
        "priority_classes.batch: must be a mapping, got 5",
        id="class-not-a-mapping",
    ),
    pytest.param(
        "priority_classes: {1: {value: 1}}\nqueues: [{name: a}]",
        "priority_classes: name 1: must be a string, got 1",
        id="class-name-number",
    ),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_tenancy(text)
    assert str(err.value) == f"tenancy file '<yaml>': {message}"


def test_first_error_counts_the_rest() -> None:
    with pytest.raises(SpecError) as err:
        parse_tenancy("queues: [{name: a, weight: 0}, {name: b, weight: -1}, {org: x}]")
    assert str(err.value) == (
        "tenancy file '<yaml>': queues[0].weight: must be > 0, got 0 (and 2 more errors)"
    )


def test_loaded_amounts_are_integers() -> None:
    queue = one_queue("queues: [{name: q, nominal: {gpu: 1.5, cpu: 0.1, memory: 1.5Gi}}]")
    assert queue.nominal == {"gpu": 1500, "cpu": 100, "memory": 1536}
    assert all(type(v) is int for v in queue.nominal.values())
