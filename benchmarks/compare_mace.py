"""The `cpu-30min` recipe against MACE: same train and test files, same machine, same wall-clock budget.

    python3 -m venv mace-venv && mace-venv/bin/pip install torch==2.13.0 && mace-venv/bin/pip install mace-torch
    python benchmarks/compare_mace.py --train train.xyz --test test.xyz --mace-venv mace-venv
    python benchmarks/compare_mace.py --train train.xyz --test test.xyz --methods none anids --seeds 0 1 2 --jobs 2
    python benchmarks/compare_mace.py --train Si/training.json --test Si/test.json --recipe mlearn-cpu --pretrained "" \
        --methods none dens anids --seeds 0 1 2 --jobs 2 --threads 2 --budget-min 15 --out results/compare_mace_Si.json

Crystals with stress: an mlearn JSON (or an extxyz with a `stress` key, `--stress-key`) is read with anids's reader
(the stress-component order is measured on the training file, `anids.data.mlearn.check_stress_order`, and applied to the
test file) and written once as extxyz for MACE with `REF_energy`, `REF_forces` and `REF_stress` (eV/A^3, ASE's order and
sign, which MACE uses too). MACE then trains with `--loss stress` (its energy, force and stress weights stay at
MACE's defaults unless `--mace-stress-weight` is given) and the stress MAE and RMSE are reported in GPa beside ours.

Our side: `anids-train --recipe cpu-30min --method METHOD` for every method and seed (`anids` and the other learned
methods start from the shipped QM9 pre-trained weights, `--pretrained qm9`; `none` trains from scratch). A run whose
`metrics.json` already exists in `--work` is read, not re-run, so an interrupted comparison picks up where it stopped.
`--jobs 2` runs two of our trainings at a time with one thread each: on a 2-core machine a step takes about as long
with one thread as with two (the batches are small), so this halves the time of the seeds without changing them.

MACE: mace-torch lives in its own virtual environment (it pins e3nn 0.4.4). It is run alone with `--threads` threads
(default 2) and the settings in `MACE_ARGS` (32 channels, L=1, correlation 3, r_max 5, EMA, SWA for the last
quarter of the epochs). MACE has no wall-clock limit, so the script first times a 2-epoch calibration run and then
gives MACE as many epochs as fit in `--budget-min`; `--mace-epochs N` skips the calibration and trains N epochs (the
number an earlier seed was given, so that further seeds get the same budget on a machine whose load has changed).
A wall-clock calibration is only as fair as the load it ran under: on a machine busier than during our runs it gives
MACE fewer epochs than our runs had time for (this happened here once: 42 epochs where 103 fit in the same 30 minutes
of a quieter machine). `--budget-cpu-min` budgets CPU time instead (the calibration's CPU/wall ratio converts its
epoch time), and every run records the CPU time of its training process (`cpu_time_s`, from the child's own rusage)
beside its wall time, so the budgets of both sides can be read off the results file. MACE's test predictions
(`mace_eval_configs`) are scored with the same error definitions as ours: energy per structure and per atom, force per
Cartesian component, MAE and RMSE.

Prints the table and writes results/compare_mace.json as it goes (after every finished run).
"""
import argparse, hashlib, json, os, re, shutil, statistics, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import numpy as np
from ase.io import read

ROOT = Path(__file__).resolve().parents[1]
MACE_ARGS = ["--model", "MACE", "--num_channels", "32", "--max_L", "1", "--r_max", "5.0", "--correlation", "3",
             "--batch_size", "5", "--valid_batch_size", "20", "--lr", "0.01", "--ema", "--swa",
             "--E0s", "average", "--default_dtype", "float32", "--device", "cpu", "--valid_fraction", "0.05"]
KEYS = ["force_mae_meV_A", "force_rmse_meV_A", "energy_mae_meV_atom", "energy_rmse_meV_atom", "energy_mae_meV",
        "energy_rmse_meV"]
STRESS_KEYS = ["stress_mae_GPa", "stress_rmse_GPa"]
EV_A3_TO_GPA = 160.21766208


def mace_inputs(a) -> dict:
    """The train and test files MACE reads, and its keys: the files themselves (extxyz without stress), or, for mlearn
    JSON or stress-carrying files, extxyz copies with REF_energy / REF_forces / REF_stress written once into --work."""
    if not a.stress:
        return dict(train=str(Path(a.train).resolve()), test=str(Path(a.test).resolve()),
                    keys=["--energy_key", a.energy_key, "--forces_key", a.forces_key])
    from anids.data.datasets import read_structures
    from anids.data.mlearn import check_stress_order
    from ase import Atoms
    from ase.io import write
    kw = dict(energy_key=a.energy_key, forces_key=a.forces_key, stress_key=a.stress_key)
    order = a.stress_order
    if order == "check" and a.train.endswith(".json"):   # the order is measured on the training file only
        order = check_stress_order(a.train)["best"]
    out = {}
    for split, path in (("train", a.train), ("test", a.test)):
        dst = Path(a.work) / f"mace_{split}.xyz"
        frames = read_structures(path, stress_order=order, **kw)
        atoms = []
        for d in frames:
            at = Atoms(numbers=d.z.numpy(), positions=d.pos.double().numpy(), cell=d.cell.reshape(3, 3).double().numpy(),
                       pbc=d.pbc.reshape(3).numpy())
            at.info["REF_energy"] = float(d.energy)
            at.arrays["REF_forces"] = d.forces.double().numpy()
            s = d.stress.reshape(3, 3).double().numpy()
            at.info["REF_stress"] = np.array([s[0, 0], s[1, 1], s[2, 2], s[1, 2], s[0, 2], s[0, 1]])   # ASE's Voigt order
            atoms.append(at)
        write(dst, atoms, format="extxyz")
        out[split] = str(dst.resolve())
    out["keys"] = ["--energy_key", "REF_energy", "--forces_key", "REF_forces", "--stress_key", "REF_stress",
                   "--compute_stress", "True", "--loss", "stress", "--error_table", "PerAtomMAEstressvirials"]
    if a.mace_stress_weight is not None: out["keys"] += ["--stress_weight", str(a.mace_stress_weight)]
    out["stress_order"] = order
    return out


def _ref(a, key, fallback):
    "A reference value by its REF_ key (the extxyz this script writes), else ASE's calculator result."
    if key in a.info: return np.asarray(a.info[key])
    if key in a.arrays: return a.arrays[key]
    return fallback(a)


def errors(ref, pred_energy, pred_forces, pred_stress=None) -> dict:
    """MAE and RMSE of energies (meV per structure and per atom), forces (meV/A per component) and, if given, stress
    (GPa per component of the 3x3 tensor), as anids.train.evaluate."""
    e_ref = np.array([float(_ref(a, "REF_energy", lambda x: x.get_potential_energy())) for a in ref])
    n = np.array([len(a) for a in ref])
    f_ref = np.concatenate([_ref(a, "REF_forces", lambda x: x.get_forces()) for a in ref])
    de, df = (np.asarray(pred_energy) - e_ref) * 1000, (np.concatenate(pred_forces) - f_ref) * 1000
    mae, rmse = lambda x: float(np.mean(np.abs(x))), lambda x: float(np.sqrt(np.mean(x ** 2)))
    out = dict(energy_mae_meV=mae(de), energy_rmse_meV=rmse(de), energy_mae_meV_atom=mae(de / n),
               energy_rmse_meV_atom=rmse(de / n), force_mae_meV_A=mae(df), force_rmse_meV_A=rmse(df), n_structures=len(ref))
    if pred_stress is not None:
        from ase.stress import voigt_6_to_full_3x3_stress
        s_ref = np.stack([voigt_6_to_full_3x3_stress(_ref(a, "REF_stress", lambda x: x.get_stress())) for a in ref])
        ds = (np.stack([np.asarray(p).reshape(3, 3) for p in pred_stress]) - s_ref) * EV_A3_TO_GPA
        out.update(stress_mae_GPa=mae(ds), stress_rmse_GPa=rmse(ds))
    return out


def run_ours(method, seed, a, threads):
    out = Path(a.work) / f"{method}_s{seed}"
    if (out / "metrics.json").exists():
        m = json.loads((out / "metrics.json").read_text())
    else:
        cmd = [str(Path(sys.executable).parent / "anids-train"), "--recipe", a.recipe, "--method", method,
               "--train", a.train, "--test", a.test, "--out", str(out), "--seed", str(seed), "--threads", str(threads),
               "--progress", "false"]
        if method != "none" and a.pretrained: cmd += ["--pretrained", a.pretrained]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        print("$", " ".join(cmd), flush=True)
        with open(str(out) + ".log", "w") as log:
            _, cpu = run_timed(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        (out / "cpu_time.json").write_text(json.dumps({"cpu_time_s": cpu}))   # beside anids-train's own metrics.json
        m = json.loads((out / "metrics.json").read_text())
    cpu = json.loads((out / "cpu_time.json").read_text())["cpu_time_s"] if (out / "cpu_time.json").exists() else None
    t = m["test"]
    return dict(model=f"{a.recipe} {method}", method=method, seed=seed, recipe=a.recipe, pretrained=m.get("pretrained"),
                wall_time_s=m["wall_time_s"], train_time_s=m["train_time_s"], cpu_time_s=cpu, threads=threads,
                n_parameters=m["n_parameters"], **{k: t[k] for k in KEYS + (STRESS_KEYS if a.stress else [])})


def mace_log_epoch_times(log: Path) -> list:
    "Timestamps (s) of MACE's per-epoch evaluation lines."
    stamps = []
    for line in log.read_text().splitlines():
        if re.search(r"Epoch\s+\d+", line):
            m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)", line)
            if m: stamps.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp())
    return stamps


def run_timed(cmd, **kw) -> tuple[float, float]:
    """Run `cmd` to completion; (wall seconds, CPU seconds of that child process: user + system, all its threads).

    The CPU time comes from the child's own rusage (`os.wait4`), so two runs started side by side (`--jobs 2`) are
    counted apart. Unlike the wall time it hardly changes when other processes share the cores, which makes it the
    fairer budget to compare two trainings that ran under different loads."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, **kw)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0: raise subprocess.CalledProcessError(proc.returncode, cmd)
    return wall, usage.ru_utime + usage.ru_stime


def mace_train(a, name, epochs, seed, eval_interval):
    work = Path(a.work) / name
    shutil.rmtree(work, ignore_errors=True); work.mkdir(parents=True)
    swa = max(1, int(0.75 * epochs))
    cmd = [str(Path(a.mace_venv) / "bin" / "mace_run_train"), "--name", "run", "--train_file", a.mace_files["train"],
           *a.mace_files["keys"], "--max_num_epochs", str(epochs),
           "--start_swa", str(swa), "--eval_interval", str(eval_interval), "--seed", str(seed), *MACE_ARGS]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    print("$", " ".join(cmd), flush=True)
    with open(work / "stdout.log", "w") as log:
        wall, cpu = run_timed(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    return work, wall, cpu


def run_mace(a, seed):
    out = Path(a.work) / f"mace_s{seed}.json"
    if out.exists(): return json.loads(out.read_text())
    done = Path(a.work) / f"mace_s{seed}" / "anids_compare_trained.json"
    if done.exists():   # trained already (an interrupted comparison): evaluate only
        info = json.loads(done.read_text())
        work, t_run, epochs, cpu_run = done.parent, info["wall_time_s"], info["epochs"], info.get("cpu_time_s")
        t_cal, t_epoch = info.get("calibration_s"), info.get("seconds_per_epoch")
    else:
        if a.mace_epochs:
            # a fixed number of epochs, e.g. the number an earlier seed's calibration gave: every MACE seed then gets
            # the same training budget, whatever the load of the machine while this one runs
            epochs, t_cal, t_epoch = a.mace_epochs, None, None
            print(f"MACE: {epochs} epochs (--mace-epochs), no calibration", flush=True)
        else:
            # calibration: 2 epochs, evaluated after each, to read the time of one epoch and the fixed overhead
            work, t_cal, cpu_cal = mace_train(a, f"mace_calibration_s{seed}", 2, seed, 1)
            stamps = mace_log_epoch_times(next((work / "logs").glob("*.log")))
            if len(stamps) < 2: raise RuntimeError(f"could not read MACE's epoch times from {work / 'logs'}")
            t_epoch = stamps[-1] - stamps[-2]
            overhead = max(0.0, t_cal - 2 * t_epoch)
            if a.budget_cpu_min:
                # the calibration's wall times in CPU seconds (its CPU/wall ratio), so that the load while it ran
                # does not change the number of epochs
                scale = cpu_cal / t_cal
                t_epoch, overhead = t_epoch * scale, overhead * scale
                epochs = max(2, int((a.budget_cpu_min * 60 - overhead) / t_epoch))
                print(f"MACE: {t_epoch:.1f} CPU s per epoch, {overhead:.0f} CPU s overhead -> {epochs} epochs in "
                      f"{a.budget_cpu_min} CPU min", flush=True)
            else:
                epochs = max(2, int((a.budget_min * 60 - overhead) / t_epoch))
                print(f"MACE: {t_epoch:.1f} s per epoch, {overhead:.0f} s overhead -> {epochs} epochs in {a.budget_min} min "
                      "(wall clock: fewer epochs when the machine is busier than during our runs; --budget-cpu-min "
                      "avoids that)", flush=True)
        # MACE keeps only the checkpoints of evaluated epochs and loads the SWA one at the end: evaluate at least
        # twice inside the SWA window (its last quarter), at most every 10 epochs
        swa_window = epochs - max(1, int(0.75 * epochs))
        work, t_run, cpu_run = mace_train(a, f"mace_s{seed}", epochs, seed, min(10, max(1, swa_window // 2)))
        done.write_text(json.dumps({"epochs": epochs, "wall_time_s": t_run, "cpu_time_s": cpu_run, "calibration_s": t_cal,
                                    "seconds_per_epoch": t_epoch}))
    model = next(p for p in work.glob("run*.model") if "compiled" not in p.name and "stagetwo" not in p.name) \
        if not (work / "run_stagetwo.model").exists() else work / "run_stagetwo.model"
    pred = work / "test_pred.xyz"
    subprocess.run([str(Path(a.mace_venv) / "bin" / "mace_eval_configs"), "--configs", a.mace_files["test"],
                    "--model", str(model), "--output", str(pred), "--device", "cpu", "--default_dtype", "float32"]
                   + (["--compute_stress"] if a.stress else []),
                   check=True, env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)), cwd=work)
    ref, got = read(a.mace_files["test"], ":"), read(pred, ":")
    stress = [g.info["MACE_stress"] for g in got] if a.stress else None
    res = dict(model="mace", method="none", seed=seed, epochs=epochs, calibration_s=t_cal, seconds_per_epoch=t_epoch,
               wall_time_s=t_run, cpu_time_s=cpu_run, threads=a.threads, model_file=model.name, mace_args=MACE_ARGS + a.mace_files["keys"],
               **errors(ref, [g.info["MACE_energy"] for g in got], [g.arrays["MACE_forces"] for g in got], stress))
    out.write_text(json.dumps(res, indent=1))
    return res


def summarise(rows):
    table = {}
    keys = KEYS + ["wall_time_s"] + (STRESS_KEYS if rows and all(k in r for r in rows for k in STRESS_KEYS) else [])
    for r in rows:
        g = table.setdefault(r["model"], {"seeds": []})
        g["seeds"].append(r["seed"])
        for k in keys:
            g.setdefault(k, []).append(r[k])
    for g in table.values():
        for k in keys:
            v = g.pop(k)
            g[k] = dict(mean=statistics.mean(v), std=statistics.stdev(v) if len(v) > 1 else float("nan"), values=v)
    return table


def print_table(table):
    cols = ["force_mae_meV_A", "force_rmse_meV_A", "energy_mae_meV_atom", "energy_rmse_meV_atom", "wall_time_s"]
    cols += [k for k in STRESS_KEYS if all(k in g for g in table.values())]
    print(f"{'model':18s} {'seeds':>6s} " + " ".join(f"{c:>24s}" for c in cols))
    for name, g in table.items():
        print(f"{name:18s} {len(g['seeds']):6d} " + " ".join(f"{g[c]['mean']:12.2f} +- {g[c]['std']:8.2f}" for c in cols))


def plot(rows, path):
    "Test force MAE and RMSE per model, one dot per seed, bars at the mean."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, key, name in zip(axes, ["force_mae_meV_A", "force_rmse_meV_A"], ["force MAE", "force RMSE"]):
        for k, m in enumerate(models):
            v = [r[key] for r in rows if r["model"] == m]
            ax.bar(k, statistics.mean(v), color=f"C{k}", alpha=0.5)
            ax.plot([k] * len(v), v, "o", color=f"C{k}")
        ax.set_xticks(range(len(models)), models, rotation=15)
        ax.set_ylabel(f"test {name} (meV/A)")
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True, help="extxyz with energies and forces")
    p.add_argument("--test", required=True, help="extxyz with energies and forces")
    p.add_argument("--energy-key", default="energy"); p.add_argument("--forces-key", default="forces")
    p.add_argument("--stress-key", default=None, help="stress key of an extxyz (mlearn JSON: always read)")
    p.add_argument("--stress-order", default="check", help="order of mlearn's six stress numbers (default: measured)")
    p.add_argument("--mace-stress-weight", type=float, default=None, help="MACE's --stress_weight (default: MACE's)")
    p.add_argument("--recipe", default="cpu-30min")
    p.add_argument("--methods", nargs="*", default=["none", "anids"], help="our noise methods (default none anids)")
    p.add_argument("--pretrained", default="qm9", help="pre-trained weights for the denoising methods ('' for none)")
    p.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    p.add_argument("--mace-seeds", nargs="*", type=int, default=[0], help="MACE seeds (none: skip MACE)")
    p.add_argument("--mace-venv", default="mace-venv", help="virtual environment with mace-torch")
    p.add_argument("--budget-min", type=float, default=30.0, help="MACE's wall-clock budget in minutes")
    p.add_argument("--budget-cpu-min", type=float, default=None,
                   help="MACE's budget in CPU minutes instead (e.g. the CPU time our runs took, `cpu_time_s`)")
    p.add_argument("--mace-epochs", type=int, default=None,
                   help="train MACE for this many epochs instead of calibrating them to --budget-min")
    p.add_argument("--threads", type=int, default=2, help="threads of MACE (and of ours with --jobs 1)")
    p.add_argument("--jobs", type=int, default=1, help="our trainings at a time (each with threads/jobs threads)")
    p.add_argument("--work", default="compare_mace_runs", help="folder for the runs")
    p.add_argument("--out", default=str(ROOT / "results" / "compare_mace.json"))
    p.add_argument("--figure", default=str(ROOT / "figures" / "compare_mace.png"))
    a = p.parse_args(argv)
    if a.mace_seeds and not (Path(a.mace_venv) / "bin" / "mace_run_train").exists():
        p.error(f"no mace_run_train in {a.mace_venv}; make the environment as shown above or pass --mace-seeds")
    Path(a.work).mkdir(parents=True, exist_ok=True)
    a.stress = bool(a.stress_key) or a.train.endswith(".json")
    a.mace_files = mace_inputs(a) if a.mace_seeds else {}
    rows, threads = [], max(1, a.threads // a.jobs)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _env import environment
    env_before = environment()

    def save():
        table = summarise(rows)
        files = {k: dict(name=Path(f).name, sha256=hashlib.sha256(Path(f).read_bytes()).hexdigest()) for k, f in (("train", a.train), ("test", a.test))}
        Path(a.out).write_text(json.dumps(dict(table=table, **files, recipe=a.recipe, budget_min=a.budget_min,
                                               stress_order=a.mace_files.get("stress_order"),
                                               runs=rows, environment_before=env_before, environment_now=environment()),
                                          indent=1))
        return table

    with ThreadPoolExecutor(a.jobs) as pool:
        for r in pool.map(lambda ms: run_ours(*ms, a, threads), [(m, s) for s in a.seeds for m in a.methods]):
            rows.append(r); save()
    for s in a.mace_seeds:
        rows.append(run_mace(a, s)); save()
    table = save()
    print_table(table)
    if a.figure and rows: plot(rows, a.figure)
    ref = f"{a.recipe} none"
    if ref in table:
        base = table[ref]["force_mae_meV_A"]["values"]
        for name, g in table.items():
            v = g["force_mae_meV_A"]["values"]
            if name != ref and len(v) == len(base):
                gain = [100 * (1 - x / b) for x, b in zip(v, base)]
                print(f"{name}: force MAE {statistics.mean(gain):+.1f} % lower than {ref} (per seed: "
                      + ", ".join(f"{g:+.1f}" for g in gain) + ")")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
