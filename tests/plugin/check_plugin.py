#!/usr/bin/env python3
"""Checks that the CUDA backend is a plugin libencore can do without (registered in CTest by
tests/CMakeLists.txt).

    check_plugin.py linkage --library L [--plugin P] --show-config S --program T
        libencore's NEEDED entries (readelf -d), and every library ldd resolves for libencore and
        for the programs, name no CUDA library (libcuda, libcudart, libcublas, libcudnn,
        libcurand, libnvrtc, libnvJitLink); the plugin's NEEDED entries do name libcudart, cuBLAS and cuDNN.
    check_plugin.py reasons --library L --plugin P --show-config S
        cuda::unavailable_reason() and show_config name what is missing: no plugin
        (ENCORE_CUDA_PLUGIN naming a missing file), a plugin that fails to load (a file that is
        not a shared library: the loader's error), and, with the plugin loaded, the driver or
        the device (or list the devices).
    check_plugin.py hidden --library L --plugin P --show-config S -- PROGRAM [ARGS]...
        runs PROGRAM (the C++ suite) through the dynamic loader with the CUDA libraries hidden
        while the plugin stays in place: `ld.so --inhibit-cache` (/etc/ld.so.cache lists the
        CUDA folder), `--inhibit-rpath` for the plugin (its RUNPATH names that folder) and
        `--library-path` with libencore's folder and one that links exactly the libraries ldd
        resolves for libencore and PROGRAM (folders would not do: /usr/lib holds other builds of some of
        them, e.g. OpenBLAS's pthreads build beside the OpenMP one libencore's RUNPATH names).
        First checks that in that environment the plugin fails to load for want of a CUDA
        library (libcudart, ...) and show_config says so; then PROGRAM must pass. Exits 77
        (skipped) where the CUDA libraries sit in a folder the loader always searches.
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

# CTest's SKIP_RETURN_CODE for the `hidden` check where the CUDA libraries sit in a folder the
# loader cannot be kept from (a system folder, or one libencore needs).
SKIPPED = 77
SYSTEM_FOLDERS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
CUDA_LIBRARY = re.compile(r"^lib(cuda|cublas|cudnn|curand|nvrtc|nvJitLink)")


def run(cmd, env=None, check=True):
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        sys.exit(f"FAILED ({result.returncode}): {' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}")
    return result


def needed(binary):
    """The NEEDED entries of an ELF file's dynamic section."""
    out = run(["readelf", "-d", binary]).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def resolved(binary):
    """{name: path} of every library the loader resolves for `binary` (ldd); exits on 'not found'."""
    out = run(["ldd", binary]).stdout
    missing = re.findall(r"^\s*(\S+) => not found", out, re.M)
    if missing:
        sys.exit(f"ldd {binary}: {', '.join(missing)} not found\n{out}")
    return dict(re.findall(r"^\s*(\S+) => (\S+) \(", out, re.M))


def interpreter(binary):
    out = run(["readelf", "-l", binary]).stdout
    found = re.search(r"Requesting program interpreter: ([^\]]+)\]", out)
    if not found:
        sys.exit(f"{binary} names no program interpreter")
    return found.group(1)


def check_linkage(args):
    direct = needed(args.library)
    cuda = [n for n in direct if CUDA_LIBRARY.match(n)]
    if cuda:
        sys.exit(f"libencore's NEEDED entries name CUDA libraries: {cuda}")
    for binary in [args.library, *args.program]:
        cuda = [f"{n} ({p})" for n, p in resolved(binary).items() if CUDA_LIBRARY.match(n)]
        if cuda:
            sys.exit(f"ldd {binary} resolves CUDA libraries: {cuda}")
    print(f"libencore NEEDED: {', '.join(direct)}")
    if args.plugin:
        plugin = needed(args.plugin)
        for expected in ("libcudart", "libcublas", "libcudnn", "libencore"):
            if not any(n.startswith(expected) for n in plugin):
                sys.exit(f"the plugin's NEEDED entries lack {expected}: {plugin}")
        print(f"plugin NEEDED: {', '.join(plugin)}")


def show_config(args, env=None, prefix=()):
    out = run([*prefix, args.show_config], env=env).stdout
    reason = re.search(r"^cuda unavailable reason: (.*)$", out, re.M)
    available = re.search(r"^cuda available: (yes|no)$", out, re.M)
    if not reason or not available:
        sys.exit(f"unexpected output of {args.show_config}:\n{out}")
    return out, available.group(1) == "yes", reason.group(1)


def expect(out, reason, *texts):
    for text in texts:
        if text not in reason:
            sys.exit(f"expected '{text}' in the reason '{reason}'; show_config:\n{out}")
    line = f"  cuda: not available ({reason})\n"
    if line not in out:
        sys.exit(f"expected '{line.strip()}' in show_config:\n{out}")


def check_reasons(args):
    env = dict(os.environ)
    env["ENCORE_CUDA_PLUGIN"] = "/nonexistent/libencore_cuda.so"
    out, available, reason = show_config(args, env)
    expect(out, reason, "no CUDA plugin: /nonexistent/libencore_cuda.so not found")
    print(f"no plugin: {reason}")

    env["ENCORE_CUDA_PLUGIN"] = __file__  # a file, but no shared library
    out, available, reason = show_config(args, env)
    expect(out, reason, f"the CUDA plugin {__file__} failed to load: ", "invalid ELF header")
    print(f"plugin not loadable: {reason}")

    out, available, reason = show_config(args)  # the plugin next to libencore
    if "\n  CUDA runtime " not in out or "\n  cuda: built for CUDA architectures " not in out:
        sys.exit(f"the plugin next to libencore did not load:\n{out}")
    if available != (reason == ""):
        sys.exit(f"available: {available} but reason '{reason}'")
    if not available and not re.match(r"no CUDA driver found$|no CUDA device \(.+\)$", reason):
        sys.exit(f"the reason names neither the driver nor the device: '{reason}'")
    print(f"plugin loaded: {reason or 'a device is present'}")


def check_hidden(args):
    if not args.command:
        sys.exit("hidden: name the program to run after --")
    program = args.command[0]
    libraries = {}
    for binary in (args.library, program):
        for name, path in resolved(binary).items():
            libraries.setdefault(name, path)
    hidden = [n for n in needed(args.plugin) if CUDA_LIBRARY.match(n)]
    # The loader always searches its system folders.
    for folder in SYSTEM_FOLDERS:
        both = [n for n in hidden if (pathlib.Path(folder) / n).exists()]
        if both:
            print(f"SKIPPED: {folder} holds the plugin's CUDA libraries ({', '.join(both)}) and stays "
                  "visible to the loader: they cannot be hidden on this machine")
            sys.exit(SKIPPED)
    with tempfile.TemporaryDirectory(prefix="encore-no-cuda-") as linked:
        # libencore itself is found in its own folder, where it looks for the plugin.
        library = pathlib.Path(args.library).resolve()
        for name, path in libraries.items():
            if pathlib.Path(path).resolve() != library:
                (pathlib.Path(linked) / name).symlink_to(path)
        loader = [interpreter(program), "--inhibit-cache", "--inhibit-rpath", args.plugin,
                  "--library-path", f"{linked}:{library.parent}"]
        env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "ENCORE_CUDA_PLUGIN")}
        out, available, reason = show_config(args, env, [interpreter(args.show_config), *loader[1:]])
        expect(out, reason, f"the CUDA plugin {args.plugin} failed to load: ")
        if not any(n in reason for n in hidden):
            sys.exit(f"the plugin failed to load, but not for want of a CUDA library ({', '.join(hidden)}): "
                     f"{reason}")
        print(f"with the CUDA libraries hidden: {reason}")
        result = run([*loader, *args.command], env=env, check=False)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-30:])
        sys.exit(f"{program} failed ({result.returncode}) with the CUDA libraries hidden:\n{tail}")
    counts = re.findall(r"^\[\s+(?:PASSED|SKIPPED)\s+\] \d+ tests?", output, re.M)
    summary = "; ".join(counts) or output.strip().splitlines()[-1]
    print(f"{program} passed with the CUDA libraries hidden: {summary}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("check", choices=["linkage", "reasons", "hidden"])
    parser.add_argument("--library", required=True, help="libencore.so")
    parser.add_argument("--plugin", help="libencore_cuda.so (CUDA builds)")
    parser.add_argument("--show-config", required=True, help="the encore_show_config program")
    parser.add_argument("--program", action="append", default=[], help="a program linked with libencore (linkage)")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.command = argv[split + 1:]  # hidden: the program to run, with its arguments
    if args.check != "linkage" and not args.plugin:
        sys.exit(f"{args.check} needs --plugin")
    {"linkage": check_linkage, "reasons": check_reasons, "hidden": check_hidden}[args.check](args)


if __name__ == "__main__":
    main()
