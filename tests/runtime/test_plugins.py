"""use_entry_points: every entry point of a group in the order of names, a failing one left
out with one warning per process."""

from __future__ import annotations

from importlib.metadata import EntryPoint

from complexformer.runtime import plugins, use_entry_points

GROUP = "complexformer.test-group"


def test_each_entry_point_is_used_in_name_order_and_a_failing_one_warns_once(monkeypatch, capsys):
    eps = [EntryPoint(n, f"mod:{n}", GROUP) for n in ("b", "bad", "a")]
    monkeypatch.setattr(plugins, "entry_points", lambda group: eps if group == GROUP else [])
    monkeypatch.setattr(plugins, "_warned", set())
    used = []

    def use(ep):
        if ep.name == "bad":
            raise ValueError("refused")
        used.append(ep.name)

    use_entry_points(GROUP, use)
    use_entry_points(GROUP, use)
    assert used == ["a", "b", "a", "b"]
    assert capsys.readouterr().err.splitlines() == [
        f"complexformer: warning: entry point 'bad' (mod:bad) of group {GROUP} is left out: "
        "ValueError: refused"
    ]
    use_entry_points("another.group", use)  # no entry points: nothing used, nothing said
    assert used == ["a", "b", "a", "b"] and capsys.readouterr().err == ""
