"""The nemesis: the schedule runner (schedule.Nemesis) and the targets its steps name, resolved
when a step acts (targets). It sits above the experiment model, whose fault steps it runs, and
drives the fault registry (harness.chaos) below it."""
