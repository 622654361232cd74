// The Kiln Console: `npm run build:console` (vite build console) writes console/dist, which the API
// serves at /console (src/api/console.ts). Everything is bundled: no CDN, no inline script or
// style, so the page runs under a strict Content-Security-Policy.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // Inline assets would need data: in the CSP; the preload polyfill is not needed by current browsers.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
