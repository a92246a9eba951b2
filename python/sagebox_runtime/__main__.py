"""``python -m sagebox_runtime <command> [args]``.

Each command lives in its own module exposing ``main(argv) -> int``; the
module is imported only when its command runs, so adding one (e.g. a training
entry point) costs the others nothing. Register it in COMMANDS.
"""

import importlib
import sys

COMMANDS = {
    # name: (module, one-line help)
    "worker": ("sagebox_runtime.worker", "serve a model to the model-server front end over a Unix socket"),
}


def usage(out):
    out.write("usage: python -m sagebox_runtime <command> [args]\n\ncommands:\n")
    for name, (_, help_) in sorted(COMMANDS.items()):
        out.write("  %-10s %s\n" % (name, help_))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        usage(sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        sys.stderr.write("sagebox_runtime: unknown command %r\n" % name)
        usage(sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
