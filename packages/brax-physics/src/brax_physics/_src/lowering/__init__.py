"""How the physics is lowered: the settings (`settings.Lowering`), the platform forms of factors and
solves (`factor`), the Newton solver's Hessian forms, work queue and compaction budgets (`newton`),
and the products' forms (`products`). The physics modules call these and read as the maths."""
