/**
 * The compiler options `create-next-app` writes into a Next.js project's tsconfig.json, which
 * `next build` typechecks with (`module` and `moduleResolution` are the caller's: `node` in
 * projects made before Next 13.4, `bundler` since).
 */
export const NEXT_COMPILER_OPTIONS = {
  target: "ES2017",
  lib: ["dom", "dom.iterable", "esnext"],
  allowJs: true,
  skipLibCheck: true,
  strict: true,
  noEmit: true,
  esModuleInterop: true,
  resolveJsonModule: true,
  isolatedModules: true,
  jsx: "preserve",
} as const;
