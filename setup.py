"""Packaging from settings.ini (nbdev 2's template, plus the extras this project declares there)."""
from configparser import ConfigParser
import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable',
            '6 - Mature', '7 - Inactive']
lic = licenses[cfg['license']]
# Ranges, not pins (the exact reproduction set is requirements-lock.txt, installed by make setup as constraints).
# An extra may name others of this project (posvec[repro,eval]); 'all' flattens those.
extras = {k[len('extra_'):]: cfg[k].split() for k in cfg if k.startswith('extra_')}
extras['dev'] = cfg.get('dev_requirements', '').split()
extras['all'] = sorted({r for k, v in extras.items() if k != 'dev' for r in v if not r.startswith(cfg['repo'] + '[')})
registry = cfg['lib_name'] + '.registry'

setuptools.setup(
    name=cfg['repo'],
    license=lic[0],
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'License :: ' + lic[1],
                 'Natural Language :: ' + cfg['language'].title(),
                 'Programming Language :: Python :: 3.11'],
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=[cfg['lib_name'], cfg['lib_name'] + '.*']) + [registry],
    package_dir={registry: 'data'},                  # the claims registry ships from data/claims.csv
    package_data={registry: ['claims.csv']},
    include_package_data=True,
    install_requires=cfg['requirements'].split(),
    extras_require=extras,
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': cfg['console_scripts'].split(),
                  'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
    version=cfg['version'],
    author=cfg['author'], author_email=cfg['author_email'], description=cfg['description'],
    keywords=cfg['keywords'],
)
