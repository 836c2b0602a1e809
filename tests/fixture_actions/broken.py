"""A user module with a bug: importing it raises. The loader reports it and goes on."""

from yuiju.world.action import Action

half_done = Action(id="half_done", name="半成品", description="不会被加载。", duration=10)

raise RuntimeError("boom: this action module is broken on purpose")
