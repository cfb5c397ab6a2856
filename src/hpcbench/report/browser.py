"""Looking at a report as a person would: Debian's Chromium, headless, driven through its
chromedriver (Selenium), opens the page, takes a screenshot, and reports every image that
did not load and every link that leads nowhere."""
import base64
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
# The page's width beside the window's, every element that reaches past the window's right
# edge (a table that would scroll sideways), and where each element with an id lies.
_LAYOUT_JS = '''
const width = document.documentElement.clientWidth;
const past = e => e.getBoundingClientRect().right > width + 0.5;
// The outermost such elements, each named by its tag and the heading above it.
const heading = e => {
    for (let at = e; at && at !== document.body; at = at.parentElement) {
        for (let s = at.previousElementSibling; s; s = s.previousElementSibling) {
            if (/^H[1-3]$/.test(s.tagName)) return s.textContent;
        }
    }
    return '';
};
const over = Array.from(document.body.querySelectorAll('*')).filter(
    e => past(e) && !(e.parentElement && e.parentElement !== document.body
                      && past(e.parentElement))).map(
    e => e.tagName.toLowerCase() + ' under "' + heading(e) + '"');
const places = {};
for (const e of document.querySelectorAll('[id]')) {
    const r = e.getBoundingClientRect();
    places[e.id] = [r.top + window.scrollY, r.bottom + window.scrollY];
}
return {scroll_width: document.documentElement.scrollWidth, width: width, over: over,
        places: places};
'''


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
    window: tuple = ()                                  # (width, height) it was shown in
    scroll_width: int = 0                               # the page's width: past the window's
    overflowing: list = field(default_factory=list)     # ... where these reach past it
    places: dict = field(default_factory=dict)          # {id: (top, bottom)} in pixels

    @property
    def ok(self):
        return bool(self.images) and not self.broken_images and not self.broken_links

    @property
    def fits(self):
        """Whether the page fits the window's width: no sideways scroll."""
        return self.scroll_width <= self.window[0] and not self.overflowing


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


def inspect(page, screenshot, window=WINDOW, pdf=None):
    """Open `page` (an HTML file) in headless Chromium, in a window of `window` (width,
    height) pixels, and report what it showed; the screenshot is of that window; with
    `pdf`, the page printed there as Chromium prints it (A4, its print style)."""
    ensure()
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                f'--window-size={window[0]},{window[1]}'):
        options.add_argument(arg)

    page, screenshot = Path(page).resolve(), Path(screenshot)
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except WebDriverException as err:
        raise BrowserUnavailable(f'Chromium did not start: {err.msg}') from None
    try:
        driver.get(page.as_uri())
        # The page's viewport exactly `window`, as a screen of that size shows it (the
        # window's own size counts the browser's frame).
        driver.execute_cdp_cmd('Emulation.setDeviceMetricsOverride', {
            'width': window[0], 'height': window[1], 'deviceScaleFactor': 1, 'mobile': False})
        seen = Seen(page, screenshot, driver.title, images=driver.execute_script(_IMAGES_JS),
                    window=tuple(window))
        layout = driver.execute_script(_LAYOUT_JS)
        seen.scroll_width, seen.overflowing = layout['scroll_width'], layout['over']
        seen.places = {k: tuple(v) for k, v in layout['places'].items()}
        ids = set(seen.places)
        for link in driver.execute_script(_LINKS_JS):
            seen.links.append(link['href'])
            problem = link_problem(link['url'], ids, page)
            if problem:
                seen.broken_links.append((link['href'], problem))
        seen.broken_images = [i['src'] for i in seen.images if not i['loaded']]
        driver.save_screenshot(str(screenshot))
        if pdf:
            from selenium.webdriver.common.print_page_options import PrintOptions
            Path(pdf).write_bytes(base64.b64decode(driver.print_page(PrintOptions())))
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
    if seen.window and not seen.fits:
        text += (f'\n  wider than its {seen.window[0]}-pixel window ({seen.scroll_width}): '
                 + ', '.join(seen.overflowing[:5]))
    return text

