-- Schema version 4: a suggestion's title and description are bytes (UTF-8),
-- as a thread's name is: valid text may hold a NUL, which text refuses.
ALTER TABLE suggestions
    ALTER COLUMN title TYPE bytea USING convert_to(title, 'UTF8'),
    ALTER COLUMN description TYPE bytea USING convert_to(description, 'UTF8');
