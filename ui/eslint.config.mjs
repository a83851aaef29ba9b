// ESLint flat config for the dashboard (npm run lint). Self-contained on purpose (no plugin or
// shared config imports): the rules that catch real bugs in plain browser/Node ES modules.
const browser = Object.fromEntries(['window', 'document', 'location', 'fetch', 'EventSource',
  'URLSearchParams', 'URL', 'sessionStorage', 'performance', 'setTimeout', 'clearTimeout',
  'setInterval', 'clearInterval', 'TextDecoder', 'AbortController', 'console', 'Date']
  .map((g) => [g, 'readonly']));
const node = Object.fromEntries(['process', 'console', 'setTimeout', 'clearTimeout', 'setInterval',
  'clearInterval', 'performance', 'fetch', 'TextDecoder', 'AbortController', 'URL']
  .map((g) => [g, 'readonly']));

const rules = {
  'no-undef': 'error',
  'no-unused-vars': ['error', { args: 'after-used', caughtErrors: 'none' }],
  'no-redeclare': 'error',
  'no-dupe-keys': 'error',
  'no-duplicate-case': 'error',
  'no-unreachable': 'error',
  'no-self-assign': 'error',
  'no-self-compare': 'error',
  'no-constant-condition': ['error', { checkLoops: false }],
  'no-cond-assign': ['error', 'except-parens'],
  'no-fallthrough': 'error',
  'no-shadow-restricted-names': 'error',
  'no-use-before-define': ['error', { functions: false, classes: true, variables: false }],
  'no-var': 'error',
  'prefer-const': 'error',
  eqeqeq: ['error', 'always'],
  'no-implicit-globals': 'error',
  'no-eval': 'error',
  'no-new-func': 'error',
};

export default [
  { ignores: ['node_modules/**', 'e2e-test/**'] },
  {
    files: ['*.js'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: browser },
    rules,
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: node },
    rules,
  },
];
