"""The intermediate representation: types, nodes, printer and verifier."""
