// ESLint with typescript-eslint's strict type-checked rules over every TypeScript file.
// Each rule turned off or tuned says why, on the line before it.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.cache/', '.tap/', 'coverage/', 'dist/', '.scratch/', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // Numbers and booleans in messages and nft text are meant (ports, thresholds, flags).
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // Implementations of Promise-returning interfaces stay `async` so a throw is a rejection.
      '@typescript-eslint/require-await': 'off',
      // `() => reply.send(x)` callbacks: the value is the callee's, returning it is harmless.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // Destructuring a key out (`const { key: _, ...rest } = o`) is how an object omits it.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true, argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // tap awaits the subtests `t.test` returns itself; awaiting each would serialise nothing.
      '@typescript-eslint/no-floating-promises': 'off',
      // A `!` on a value the test just produced fails as a TypeError, which fails the test.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Tests read parsed JSON (nft -j, HTTP answers); a wrong shape fails the assertion.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // Tests strip keys from fixtures they cloned (`delete c.metadata.labels[HINT]`).
      '@typescript-eslint/no-dynamic-delete': 'off',
    },
  },
  {
    files: ['bench/**/*.ts'],
    rules: {
      // Benchmarks index the runs they just made; a missing one fails the run, loudly.
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
