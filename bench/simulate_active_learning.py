"""Active learning against uniform selection, on synthetic verifiable data with an oracle labeler.

Two protocols, written to bench/results/active_learning.json (paper) or
active_learning_iterative.json (iterative), each with an SVG beside it:

- `--protocol iterative` (the default; active_learning.simulate, as `stepwise simulate`): both
  arms start from the same seed labels and get the same label budget each round, the active arm's
  PRM retrained and ranking the pool every round, as the platform's rounds do.
- `--protocol paper` (active_learning.experiment, as `stepwise simulate --protocol paper`):
  Lightman et al.'s measurement: K candidates a problem, a fixed selector trained once on one
  uniform sample a problem, a ladder of samples per problem labeled by each arm (active, uniform,
  retrain, uncertainty), a fresh PRM per rung, and the data-efficiency ratio from fitted lines
  with a bootstrap interval over seeds. `--ablations` adds named config overrides
  (active_learning.experiment.ABLATIONS), each run on the active and uniform arms.

The figure of merit is the data-efficiency ratio, the labels uniform selection needs for the
quality active learning reached.

    OMP_NUM_THREADS=1 python bench/simulate_active_learning.py    # iterative: about an hour on a CPU core
    OMP_NUM_THREADS=1 python bench/simulate_active_learning.py --seed 7   # another pool, test set and training seed
    python bench/simulate_active_learning.py --protocol paper --quick     # a smoke run of the paper protocol
    OMP_NUM_THREADS=1 python bench/simulate_active_learning.py --protocol paper --ablations all
    python bench/simulate_active_learning.py --protocol paper --base 100m --device cuda \
        --pretrain-steps 2000 --train-steps 1000 --learning-rate 3e-4  # on a GPU
"""

import argparse
import dataclasses
import sys
from pathlib import Path

from active_learning import experiment
from active_learning.simulate import SimulationConfig, run_and_report

RESULTS = {"paper": Path(__file__).parent / "results" / "active_learning.json",
           "iterative": Path(__file__).parent / "results" / "active_learning_iterative.json"}


def main() -> None:
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument("--protocol", choices=["iterative", "paper"], default="iterative")
    protocol = chooser.parse_known_args()[0].protocol
    paper = protocol == "paper"
    config_class = experiment.ExperimentConfig if paper else SimulationConfig
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], parents=[chooser])
    for f in dataclasses.fields(config_class):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=None,
                            help=f"{f.metadata['help']} (default {f.default})")
    parser.add_argument("--output", type=Path, default=RESULTS[protocol])
    parser.add_argument("--quick", action="store_true", help="a smoke run, not a measurement")
    if paper:
        parser.add_argument("--ablations", default="",
                            help=f"comma-separated, or all: {', '.join(experiment.ABLATIONS)}")
    args = vars(parser.parse_args())
    args.pop("protocol")
    output, quick = args.pop("output"), args.pop("quick")
    ablations = args.pop("ablations", "")
    names = list(experiment.ABLATIONS) if ablations == "all" else [n for n in ablations.split(",") if n]
    seed = args["seed"] if args["seed"] is not None else 0
    config = config_class.quick(seed) if quick else config_class(seed=seed)
    config = config.replace(**{k: v for k, v in args.items() if v is not None})
    if paper:
        log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        print(experiment.run_and_report(config, output, names, log))
    else:
        print(run_and_report(config, output))


if __name__ == "__main__":
    main()
