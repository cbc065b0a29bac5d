import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';
import { permissionsPlugin } from './permissions-plugin.ts';

/**
 * The dashboard is built to static files (dist/) that the gateway serves under /app/ from the
 * API's own origin: no CORS, and the page's CSP can stay `script-src 'self'`.
 */
export default defineConfig({
  base: '/app/',
  plugins: [react(), permissionsPlugin()],
  build: {
    outDir: 'dist',
    // Every asset is a file of its own: fonts and styles as data: URLs would need a looser CSP.
    assetsInlineLimit: 0,
  },
});
