"""Two runs' summaries compared: equal within the tolerance, every other difference named."""

from __future__ import annotations

import json

import pytest

from analyses.replication.compare import decisions, differences, hosts, main

RUN = {"claims": [{"id": "a", "value": 0.25, "outcome": "holds", "lo": float("nan")}],
       "environment": {"host": "one"}, "timings_s": {"sweep": 12.0}, "n_boot": 1000}


def test_values_within_the_tolerance_and_host_facts_are_the_same():
    other = json.loads(json.dumps(RUN))
    other["claims"][0]["value"] += 4e-7
    other["environment"]["host"], other["timings_s"]["sweep"] = "two", 30.0
    assert list(differences(RUN, other)) == []
    assert list(differences({"x": float("inf")}, {"x": float("inf")})) == []
    assert list(differences({"x": float("inf")}, {"x": -float("inf")})) == ["/x: inf against -inf"]


def test_every_other_difference_is_named_with_its_place():
    other = json.loads(json.dumps(RUN))
    other["claims"][0].update(value=0.2500021, outcome="fails", lo=0.1)
    other["claims"].append({"id": "b"})
    del other["n_boot"]
    found = list(differences(RUN, other))
    assert found == ["/claims: 1 entries against 2",
                     "/claims[0]/lo: nan against 0.1",
                     "/claims[0]/outcome: 'holds' against 'fails'",
                     "/claims[0]/value: 0.25 against 0.2500021",
                     "/n_boot: only in the first"]


def test_the_command_exits_1_on_a_difference_and_2_on_an_unreadable_file(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(RUN))
    b.write_text(json.dumps({**RUN, "n_boot": 100}))
    assert main([str(a), str(a)]) == 0
    assert main([str(a), str(b)]) == 1
    assert "/n_boot: 1000 against 100" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main([str(a), str(tmp_path / "missing.json")])
    assert e.value.code == 2
    assert "missing.json" in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_decisions_and_the_hosts_are_said_apart(tmp_path, capsys):
    other = json.loads(json.dumps(RUN))
    other["claims"][0]["outcome"] = "fails"
    assert decisions(RUN, RUN) == [] and decisions(RUN, other) == ["a: 'holds' against 'fails'"]
    intel = {"environment": {"cpu_model": "GenuineIntel Xeon family 6 model 207",
                             "mkl_cbwr": "AVX2,STRICT", "torch_threads": 2}}
    amd = {"environment": {**intel["environment"],
                           "cpu_model": "AuthenticAMD AMD EPYC family 25 model 17"}}
    assert len(hosts(intel, intel)) == 2 and len(hosts(amd, amd)) == 2   # one processor
    zen3 = {"environment": {**amd["environment"], "cpu_model": "AuthenticAMD EPYC family 25"}}
    assert "Intel processors only" in hosts(amd, zen3)[2]      # MKL's own pick may differ
    other_intel = {"environment": {**intel["environment"],
                                   "cpu_model": "GenuineIntel Xeon family 6 model 85"}}
    assert len(hosts(intel, other_intel)) == 2     # a named branch holds across Intel models
    unknown = {"environment": {"mkl_cbwr": "AVX2,STRICT", "torch_threads": 2}}
    for pair in ((unknown, unknown), (intel, unknown), (unknown, {})):  # none is a vendor
        said = hosts(*pair)
        assert len(said) == 3 and "cannot be told" in said[2], said
    said = hosts(intel, amd)
    assert "AuthenticAMD" in said[1] and "Intel processors only" in said[2]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({**RUN, **intel}))
    b.write_text(json.dumps({**other, **amd}))
    assert main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "1 claim(s) with another outcome\n  a: 'holds' against 'fails'" in out
    assert "Intel processors only" in out
