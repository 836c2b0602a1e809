"""悠酱's world: the clock, state, evolutions, actions API, policies and the engine that runs them."""
