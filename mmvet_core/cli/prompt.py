"""`prompt`: print the judge prompt that will be sent, its header or filled for one sample (`prompt`)."""
from __future__ import annotations

import sys

from ..inputs.benchmark import load_bundled_v1
from ..judging.prompt import examples_label, prompt_template, render_prompt
from .common import examples_of, load_benchmark_spec
from .parser import Command, UsageError, option


def cmd_prompt(args) -> int:
    examples = examples_of(args)
    spec = str(args.benchmark)
    if spec in ("mmvet-v1", "mmvet-v2", "v1", "v2") and args.sample is None:
        version = "v2" if spec.endswith("v2") else "v1"
        text = prompt_template(version, examples)
    else:
        benchmark = load_bundled_v1() if spec in ("mmvet-v1", "v1") else load_benchmark_spec(spec)
        version = benchmark.version
        if args.sample is None:
            text = prompt_template(version, examples)
        else:
            if args.sample not in benchmark.samples:
                raise UsageError(f"no sample {args.sample!r} in {benchmark.name}")
            sample = benchmark.samples[args.sample]
            text = render_prompt(version, sample.question, sample.answer, args.prediction, examples=examples)
    label = examples_label(examples)
    official = "" if examples is None else "  [NOT the official MM-Vet prompt]"
    print(f"# MM-Vet {version} judge prompt, in-context examples: {label}{official}", file=sys.stderr)
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    return 0


PROMPT = Command("prompt", "print the judge prompt that will be sent", (
    option("--benchmark", default="mmvet-v1", help="mmvet-v1, mmvet-v2 or a benchmark as for grade"),
    option("--prompt-examples", default=None, help="as for grade (default: all seven, official)"),
    option("--sample", default=None, help="fill the prompt for this sample id (default: the header only)"),
    option("--prediction", default="<the model's answer>", help="the prediction to fill in with --sample"),
), run=cmd_prompt)
