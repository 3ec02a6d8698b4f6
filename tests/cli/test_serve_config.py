"""``suanli serve --config FILE``: a YAML file of serve's options, as defaults that the
command line overrides; a key that is no option, or a file that is no mapping, is an error
naming the file and the key. Parsed only (``make_context``): nothing is started."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from suanli.cli.main import _load


def parse(*args: str) -> dict[str, object]:
    ctx = _load("serve").make_context("serve", list(args))
    return dict(ctx.params)


def test_a_config_file_sets_the_options_and_the_command_line_wins(tmp_path: Path) -> None:
    f = tmp_path / "serve.yaml"
    f.write_text(
        "backend: ray\nray-address: head:6379\nshared_dir: /mnt/shared\npreempt: true\n"
        "tenant-user: [lab=alice, ops=bob]\ninventory-interval: 2.5\n"
    )
    got = parse("--config", str(f))
    assert got["engine"] == "ray" and got["ray_address"] == "head:6379"
    assert got["shared_dir"] == Path("/mnt/shared") and got["preempt"] is True
    assert got["tenant_user"] == ["lab=alice", "ops=bob"] and got["inventory_interval"] == 2.5
    over = parse("--config", str(f), "--ray-address", "other:1", "--inventory-interval", "9")
    assert over["ray_address"] == "other:1" and over["inventory_interval"] == 9.0
    assert parse()["engine"] == "local"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("no-such-option: 1\n", "'no-such-option' is not an option of suanli serve"),
        ("- backend\n", "must be a mapping"),
        ("backend: [\n", "serve.yaml"),
    ],
)
def test_a_bad_config_file_is_an_error_naming_what(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "serve.yaml"
    f.write_text(text)
    with pytest.raises(typer.BadParameter, match=match):
        parse("--config", str(f))
