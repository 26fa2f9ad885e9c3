"""Files in the exact layouts that lmms-eval and VLMEvalKit write, built from real predictions and real grades.

Each writer reproduces what the toolkit's own writer puts on disk (studied in their sources, not copied):

* lmms-eval v0.1–v0.2.3: ``__main__`` dumps ``{"args", "model_configs", "logs": [...sorted by doc_id], "time"}``;
  each log is the evaluator's example ``{"doc_id", "target", "doc", "arguments", "resps", "filtered_resps"}`` plus
  the task's metric dict ``gpt_eval_score``;
* lmms-eval v0.2.4–v0.3: ``EvaluationTracker.save_results_samples`` appends one JSON line per sample to
  ``<model>/<date>_samples_mmvet.jsonl``: the example (``doc`` without image keys, ``doc_hash``, ``prompt_hash``,
  ``target_hash``) with ``input`` added, ``arguments`` turned into a dict, ``target`` a string;
* lmms-eval v0.4–v0.6: the same writer also pops ``doc`` and ``arguments`` (and ``resps`` when equal to
  ``filtered_resps``): ``{"doc_id", "target", "filtered_resps": [text], "doc_hash", "gpt_eval_score", "input"}``;
* lmms-eval v0.7+: ``filtered_resps`` is flattened to the answer string and ``token_counts`` is added;
* VLMEvalKit: the dataset table without its image column plus ``prediction``, dumped by ``vlmeval.smp.dump``
  (xlsx through xlsxwriter with strings never turned into formulas; csv/tsv with every cell quoted; json as a
  list of row objects, ``indent=4``, ``ensure_ascii=False``); the judge adds ``score`` and ``log`` columns and
  the file becomes ``{model}_MMVet_{judge}.{ext}``.

lmms-eval's ``gpt_eval_score`` is ``{question_id, question, gt_answer, capabilities, pred_answer, score,
eval_model}`` (lmms_eval/tasks/mmvet/utils.py); lmms-lab/MMVet's ``capability`` is a comma-joined string.
"""
from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pandas as pd

from mmvet_core.inputs.benchmark import Benchmark

PRE_PROMPT = "First please perform reasoning, and think step by step to provide best answer to the following " \
             "question: \n\n"     # lmms-eval's default pre_prompt for mmvet since v0.2


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _doc(bench: Benchmark, sid: str) -> dict:
    s = bench.samples[sid]
    return {"question_id": sid, "question": s.question, "answer": s.answer, "image_source": s.image_source or "",
            "capability": ",".join(s.capabilities)}


def _metric(bench: Benchmark, sid: str, pred: str, score: float | None, judge: str | None) -> dict:
    s = bench.samples[sid]
    return {"gpt_eval_score": {"question_id": sid, "question": s.question, "gt_answer": s.answer,
                               "capabilities": ",".join(s.capabilities), "pred_answer": pred,
                               "score": 0.0 if score is None else score, "eval_model": judge or ""}}


def _items(preds: dict[str, str], bench: Benchmark):
    """(doc_id, id, prediction) in the dataset order: doc_id is the position in lmms-lab/MMVet (v1_0 ...)."""
    for sid, pred in preds.items():
        yield bench.ids.index(sid), sid, pred


def _judge_of(judges, sid):
    return judges.get(sid) if isinstance(judges, dict) else judges


def lmms_v01_logs(path: Path, preds: dict[str, str], bench: Benchmark, scores: dict | None = None,
                  judge="gpt-4-0613") -> Path:
    logs = []
    for doc_id, sid, pred in _items(preds, bench):
        doc = _doc(bench, sid)
        ex = {"doc_id": doc_id, "target": doc["answer"], "doc": doc,
              "arguments": [[doc["question"], {"max_new_tokens": 1024, "temperature": 0}]],
              "resps": [[pred]], "filtered_resps": [pred]}
        ex.update(_metric(bench, sid, pred, (scores or {}).get(sid), _judge_of(judge, sid)))
        logs.append(ex)
    doc = {"args": {"model": "llava", "model_args": "pretrained=liuhaotian/llava-v1.5-13b", "tasks": "mmvet"},
           "model_configs": {"task": "mmvet", "dataset_path": "lmms-lab/MMVet"},
           "logs": sorted(logs, key=lambda x: x["doc_id"]), "time": "0126_1458"}
    path.write_text(json.dumps(doc, indent=4, ensure_ascii=False), encoding="utf-8")
    return path


def _lines(path: Path, records: list[dict]) -> Path:
    with open(path, "a", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def lmms_v03_jsonl(path: Path, preds: dict[str, str], bench: Benchmark, scores: dict | None = None,
                   judge="gpt-4-0613") -> Path:
    records = []
    for doc_id, sid, pred in _items(preds, bench):
        doc = _doc(bench, sid)
        prompt = PRE_PROMPT + doc["question"]
        ex = {"doc_id": doc_id, "doc": doc, "target": doc["answer"],
              "arguments": {0: 1024, 1: 0.2, 2: 1.0, 3: 1, 4: False}, "resps": [[pred]], "filtered_resps": [pred],
              "doc_hash": _hash(json.dumps(doc, indent=2)), "prompt_hash": _hash(prompt),
              "target_hash": _hash(doc["answer"])}
        ex.update(_metric(bench, sid, pred, (scores or {}).get(sid), _judge_of(judge, sid)))
        ex["input"] = prompt
        records.append(ex)
    return _lines(path, records)


def lmms_v04_jsonl(path: Path, preds: dict[str, str], bench: Benchmark, scores: dict | None = None,
                   judge="gpt-4o-2024-11-20") -> Path:
    records = []
    for doc_id, sid, pred in _items(preds, bench):
        doc = _doc(bench, sid)
        ex = {"doc_id": doc_id, "target": doc["answer"], "filtered_resps": [pred],
              "doc_hash": _hash(json.dumps(doc, indent=2))}
        ex.update(_metric(bench, sid, pred, (scores or {}).get(sid), _judge_of(judge, sid)))
        ex["input"] = PRE_PROMPT + doc["question"]
        records.append(ex)
    return _lines(path, records)


def lmms_v07_jsonl(path: Path, preds: dict[str, str], bench: Benchmark, scores: dict | None = None,
                   judge="gpt-4o-2024-11-20") -> Path:
    records = []
    for doc_id, sid, pred in _items(preds, bench):
        doc = _doc(bench, sid)
        ex = {"doc_id": doc_id, "target": doc["answer"], "filtered_resps": pred,
              "token_counts": [{"input_tokens": 600 + doc_id, "output_tokens": len(pred.split())}],
              "doc_hash": _hash(json.dumps(doc, indent=2))}
        ex.update(_metric(bench, sid, pred, (scores or {}).get(sid), _judge_of(judge, sid)))
        ex["input"] = PRE_PROMPT + doc["question"]
        records.append(ex)
    return _lines(path, records)


def lmms_results_json(folder: Path, date_id: str, model_args: str, model: str = "llava") -> Path:
    """``<date>_results.json`` as lmms-eval v0.4+'s ``EvaluationTracker.save_results_aggregated`` writes it beside
    the samples file: the results with ``config`` (model, model_args, ...) and the general config tracker's fields
    (``model_name`` taken from model_args' ``pretrained=``, ``model_name_sanitized``: the folder's name)."""
    name = model_args.split("pretrained=")[1].split(",")[0] if "pretrained=" in model_args else ""
    doc = {"results": {"mmvet": {"alias": "mmvet", "gpt_eval_score,none": 36.3}},
           "configs": {"mmvet": {"task": "mmvet", "dataset_path": "lmms-lab/MMVet"}},
           "versions": {"mmvet": "Yaml"},
           "config": {"model": model, "model_args": model_args, "batch_size": "1", "limit": None},
           "git_hash": "75571cf", "date": date_id, "task_hashes": {}, "model_source": model,
           "model_name": name, "model_name_sanitized": "__".join(name.split("/")[-2:]),
           "system_instruction": None, "chat_template": None, "total_evaluation_time_seconds": "812.5"}
    path = folder / f"{date_id}_results.json"
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


LMMS_WRITERS = {"lmms-eval-json": lmms_v01_logs, "lmms-eval-jsonl": lmms_v03_jsonl,
                "lmms-eval-jsonl-v0.4": lmms_v04_jsonl, "lmms-eval-jsonl-v0.7": lmms_v07_jsonl}


def vlmevalkit_frame(preds: dict[str, str], bench: Benchmark, scores: dict | None = None) -> pd.DataFrame:
    """VLMEvalKit's MMVet table (index 0..217, question, answer, category) with the model's predictions and,
    when `scores` is given, the judge's ``score`` and ``log`` columns."""
    rows = []
    for sid, pred in preds.items():
        s = bench.samples[sid]
        row = {"index": bench.ids.index(sid), "question": s.question, "answer": s.answer,
               "category": ",".join(s.capabilities), "image_path": f"{sid}.png", "prediction": pred}
        if scores is not None:
            row["score"] = scores[sid]
            row["log"] = "Succeed" if scores[sid] > 0 else \
                f"Try 0: output is {scores[sid]}x, failed to parse.\nSucceed"
        rows.append(row)
    return pd.DataFrame(rows)


def vlmevalkit_dump(df: pd.DataFrame, path: Path) -> Path:
    ext = path.suffix.lstrip(".")
    if ext == "xlsx":
        with pd.ExcelWriter(path, engine="xlsxwriter",
                            engine_kwargs={"options": {"strings_to_formulas": False}}) as writer:
            df.to_excel(writer, index=False)
    elif ext == "csv":
        df.to_csv(path, index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    elif ext == "tsv":
        df.to_csv(path, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    elif ext == "json":
        with open(path, "w") as f:
            json.dump(df.to_dict("records"), f, indent=4, ensure_ascii=False)
    else:
        raise ValueError(ext)
    return path


def vlmevalkit(path: Path, preds: dict[str, str], bench: Benchmark, scores: dict | None = None) -> Path:
    return vlmevalkit_dump(vlmevalkit_frame(preds, bench, scores), path)
