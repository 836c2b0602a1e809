"""The other module defining the id 'stretch'."""

from yuiju.world.action import Action

stretch_again = Action(
    id="stretch", name="再伸个懒腰", description="又伸了个懒腰。[耗时10分钟]", duration=10
)
