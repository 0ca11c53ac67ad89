"""Django's MySQL backend with connections kept between requests (ENGINE ``infra.mysql``)."""
