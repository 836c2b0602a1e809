"""A module whose name starts with '_': the loader must never import it."""

import pytest

pytest.fail("tests/fixture_actions/_hidden.py was imported; '_' modules must be skipped")
