import setuptools

setuptools.setup(setup_requires=['pbr>=6.1.1'], pbr=True)
