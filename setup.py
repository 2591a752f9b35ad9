import setuptools

setuptools.setup(
    setup_requires=['pbr>=6.1.1'], pbr=True,
    # The per-reference loops of memcanal.estimation (stack distances,
    # SHARDS), compiled: numpy cannot vectorise them.
    ext_modules=[setuptools.Extension(
        'memcanal.estimation._lru', ['memcanal/estimation/_lru.c'],
        extra_compile_args=['-O3'])])
