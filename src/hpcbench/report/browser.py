"""Looking at a report as a person would: Debian's Chromium, headless, driven through its
chromedriver (Selenium), opens the page, takes a screenshot, and reports every image that
did not load and every link that leads nowhere."""
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from hpcbench.stack import debian

PACKAGES = ('chromium', 'chromium-driver')
CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
WINDOW = (1280, 2000)

# Every <img>: whether the browser decoded it (complete, with a natural size).
_IMAGES_JS = '''
return Array.from(document.images).map(img => ({
    src: img.getAttribute('src'),
    loaded: img.complete && img.naturalWidth > 0 && img.naturalHeight > 0,
    width: img.naturalWidth, height: img.naturalHeight}));
'''
_LINKS_JS = '''
return Array.from(document.querySelectorAll('a[href]')).map(a => ({
    href: a.getAttribute('href'), url: a.href}));
'''
_IDS_JS = 'return Array.from(document.querySelectorAll("[id]")).map(e => e.id);'


class BrowserUnavailable(RuntimeError):
    pass


@dataclass
class Seen:
    """What the browser showed."""
    page: Path
    screenshot: Path
    title: str
    images: list = field(default_factory=list)        # dicts: src, loaded, width, height
    broken_images: list = field(default_factory=list)  # src of those that did not load
    links: list = field(default_factory=list)          # href of every link
    broken_links: list = field(default_factory=list)   # (href, why)

    @property
    def ok(self):
        return bool(self.images) and not self.broken_images and not self.broken_links


def ensure():
    """Chromium and its driver, installed from Debian when missing (as root)."""
    try:
        debian.ensure(list(PACKAGES))
    except (debian.MissingPackages, OSError) as err:
        raise BrowserUnavailable(str(err)) from None
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            raise BrowserUnavailable(f'{path} is missing (Debian packages {", ".join(PACKAGES)})')


def link_problem(url, ids, page):
    """Why a link (resolved URL) leads nowhere, or None: an anchor of this page must name
    an element's id; a file must exist; other schemes are not followed (the report is
    read offline)."""
    parsed = urlparse(url)
    if parsed.scheme != 'file':
        return None if parsed.scheme in ('http', 'https', 'mailto') else f'scheme {parsed.scheme}'

    target = Path(unquote(parsed.path))
    if not target.exists():
        return f'{target} does not exist'
    if parsed.fragment and target.resolve() == Path(page).resolve() and parsed.fragment not in ids:
        return f'no element with id {parsed.fragment!r}'
    return None


def inspect(page, screenshot):
    """Open `page` (an HTML file) in headless Chromium and report what it showed."""
    ensure()
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                f'--window-size={WINDOW[0]},{WINDOW[1]}'):
        options.add_argument(arg)

    page, screenshot = Path(page).resolve(), Path(screenshot)
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except WebDriverException as err:
        raise BrowserUnavailable(f'Chromium did not start: {err.msg}') from None
    try:
        driver.get(page.as_uri())
        seen = Seen(page, screenshot, driver.title, images=driver.execute_script(_IMAGES_JS))
        ids = set(driver.execute_script(_IDS_JS))
        for link in driver.execute_script(_LINKS_JS):
            seen.links.append(link['href'])
            problem = link_problem(link['url'], ids, page)
            if problem:
                seen.broken_links.append((link['href'], problem))
        seen.broken_images = [i['src'] for i in seen.images if not i['loaded']]
        driver.save_screenshot(str(screenshot))
    finally:
        driver.quit()
    return seen


def describe(seen):
    text = (f'Chromium showed "{seen.title}": {len(seen.images)} image(s), '
            f'{len(seen.images) - len(seen.broken_images)} loaded; {len(seen.links)} link(s), '
            f'{len(seen.broken_links)} broken; screenshot {seen.screenshot}')
    for src in seen.broken_images:
        text += f'\n  image not loaded: {src}'
    for href, why in seen.broken_links:
        text += f'\n  broken link {href}: {why}'
    return text

