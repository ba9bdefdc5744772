"""The graph model: builder, state, the superstep algorithm and the in-process executor."""
