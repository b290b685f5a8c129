"""The sub-commands of `kafka-chaos`, one module each.

A command module exposes `NAME`, `add_arguments(parser)` and `run(args, settings) -> int` (an
exit code of kafka_chaos.commands.common); kafka_chaos.cli lists them in `COMMAND_MODULES`.
Adding a command is one module plus one line there.
"""
