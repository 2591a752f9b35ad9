import setuptools

setuptools.setup(
    setup_requires=['pbr>=6.1.1'], pbr=True,
    # The per-reference loops of memcanal.estimation (stack distances,
    # SHARDS), compiled: numpy cannot vectorise them.
    ext_modules=[
        setuptools.Extension(
            'memcanal.estimation._lru', ['memcanal/estimation/_lru.c'],
            extra_compile_args=['-O3']),
        # Isolated sharing's searches (memcanal.policy.isolated): a
        # whole cloud's plan within the optimizer's period.
        setuptools.Extension(
            'memcanal.policy._allocate', ['memcanal/policy/_allocate.c'],
            extra_compile_args=['-O3'])])
