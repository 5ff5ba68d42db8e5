// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const noVscode = {
  'no-restricted-imports': [
    'error',
    {
      paths: [{ name: 'vscode', message: 'src/protocol and src/ui stay free of `vscode` so node can test them; wire it in src/editor.' }],
    },
  ],
};

export default tseslint.config(
  { ignores: ['out/**', 'dist/**', 'node_modules/**', 'src/protocol/schema.generated.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  { files: ['**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['*.mjs', 'scripts/*.mjs'] }, tsconfigRootDir: import.meta.dirname },
      globals: { process: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
    },
  },
  // Architecture invariant: the protocol layer and the views know nothing of VS Code.
  { files: ['src/protocol/**/*.ts', 'src/ui/**/*.ts', 'test/**/*.ts'], rules: noVscode },
  // node:test's test() and describe() return promises that the runner awaits.
  { files: ['test/**/*.ts'], rules: { '@typescript-eslint/no-floating-promises': 'off' } },
);
