"""One of two modules that define the same action id."""

from yuiju.world.action import Action

stretch = Action(id="stretch", name="伸懒腰", description="伸个懒腰。[耗时10分钟]", duration=10)
