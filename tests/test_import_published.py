"""The shipped published_throughput.csv: faithful to the reference, zoo names, import."""

import csv

import pytest

from advisor.importers import ImportDataError
from advisor.importers.published import FILE, import_published, load_published
from cloud.gpus import gpu_spec
from gpuadvisor import data
from gpuadvisor.store import Store

SHIPPED = data.shipped(FILE)


def _shipped():
    with open(SHIPPED, newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_published_figure_is_carried_with_its_citation(reference):
    with open(reference / "published" / "throughput.csv", newline="") as handle:
        published = list(csv.DictReader(handle))
    shipped = {(r["model_as_published"], r["gpu_as_published"], r["num_gpus"], r["precision"]):
               r for r in _shipped()}
    assert len(shipped) == len(published)
    for row in published:
        carried = shipped[(row["model"], row["gpu"], row["num_gpus"], row["precision"])]
        assert float(carried["throughput"]) == float(row["throughput"])
        assert carried["unit"] == row["unit"]
        assert carried["source"].startswith("published: NVIDIA/DeepLearningExamples")


def test_names_match_the_zoo_and_the_catalog():
    from profiler.zoo import resolve

    for row in _shipped():
        assert gpu_spec(row["gpu"]).gpu == row["gpu"]
        if row["in_zoo"] == "1":
            assert resolve(row["model"]).name == row["model"]
    assert {r["model"] for r in _shipped() if r["in_zoo"] == "0"} == {"transformer_big"}
    bert = [r for r in _shipped() if r["model"] == "bert_large"]
    assert bert and all(r["seq_len"] == "384" and "fine-tuning" in r["notes"] for r in bert)


def test_import_marks_rows_published_and_is_idempotent(tmp_path):
    with Store(tmp_path / "m.db") as store:
        first = import_published(store)
        assert first.rows == {"trials": len(_shipped())}
        again = import_published(store)
        assert again.already_imported
        trials = store.rows("trials")
        assert len(trials) == len(_shipped())
        assert {t["source"] for t in trials} == {"published"}
        (a100,) = [t for t in trials if t["model"] == "resnet50" and t["gpu_type"] == "A100-80GB"
                   and t["gpus_per_node"] == 8 and t["precision"] == "amp"]
        assert a100["throughput"] == 16621 and a100["batch_per_gpu"] == 256
        assert a100["nodes"] == 1 and a100["extra"]["unit"] == "img/s"
        big = [t for t in trials if t["model"] == "transformer_big"]
        assert all(t["batch_per_gpu"] is None and t["extra"]["tokens_per_gpu_batch"] == 10240
                   and t["extra"]["unit"] == "tok/s" for t in big)


def test_bad_published_file(tmp_path):
    bad = tmp_path / "figures.csv"
    bad.write_text("model,gpu\nresnet50,A100\n")
    with pytest.raises(ImportDataError, match="lacks columns"):
        load_published(bad)
    rows = SHIPPED.read_text().splitlines()
    bad.write_text("\n".join([rows[0], rows[1].replace(",A100-80GB,A100-80GB,", ",Z9,Z9,")]))
    with pytest.raises(ImportDataError, match="line 2: .*unknown GPU 'Z9'"):
        load_published(bad)
